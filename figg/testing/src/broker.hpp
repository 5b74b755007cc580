// SPDX-License-Identifier: Apache-2.0
// Internal: the Figg test broker. Its state (each topic's log of messages at byte offsets), the
// listener with its port kept while stopped and the public face (server.cpp), on one io thread;
// each client connection is a Session (session.hpp) that applies Figg's rules to it.
#pragma once

#include <algorithm>
#include <asio.hpp>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "polybus/figg_testing.hpp"
#include "polybus/io/io_thread.hpp"
#include "polybus/io/port_hold.hpp"
#include "polybus/io/server_stream.hpp"

namespace polybus::figg::testing {

using asio::ip::tcp;

struct Entry {
  std::uint64_t start;  // byte position of the message in the log
  std::shared_ptr<const std::string> data;
  std::uint64_t next() const { return start + 4 + data->size(); }
};

struct Topic {
  std::uint64_t first_number = 0;  // absolute number of log.front()
  std::uint64_t delivered = 0;     // DATA frames sent, to every attachment
  std::uint64_t end = 0;           // byte position after the last message
  std::size_t bytes = 0;
  std::deque<Entry> log;
  std::uint64_t end_number() const { return first_number + log.size(); }
  std::uint64_t first_offset() const { return log.empty() ? end : log.front().start; }
};

// With the real server's quirks, an ATTACH from beyond the log's end delivers nothing, ever.
constexpr std::uint64_t kNeverDelivers = UINT64_MAX;

class Session;

class BrokerImpl {
 public:
  explicit BrokerImpl(BrokerOptions options)
      : options_(std::move(options)),
        tls_context_(options_.tls_cert_file.empty() || options_.tls_key_file.empty()
                         ? nullptr
                         : make_server_tls_context(options_.tls_cert_file, options_.tls_key_file)),
        acceptor_(io_.context()) {
    for (const auto& rule : options_.faults) faults_.add(rule);
    io_.run([this] { listen(options_.port); });
  }
  ~BrokerImpl() {
    io_.run([this] { close_all(); });
    io_.stop_and_join();
  }

  template <typename Fn>
  auto run(Fn fn) -> decltype(fn()) {
    return io_.run(std::move(fn));
  }

  void listen(std::uint16_t port) {
    tcp::endpoint endpoint(asio::ip::make_address(options_.host), port);
    acceptor_.open(endpoint.protocol());
    acceptor_.set_option(tcp::acceptor::reuse_address(true));
    acceptor_.bind(endpoint);
    acceptor_.listen();
    port_hold_.release();
    port_ = acceptor_.local_endpoint().port();
    accept();
  }
  void accept();
  void close_all();

  // Called by sessions (io thread).
  Topic& topic(const std::string& name) { return topics_[name]; }
  void published(const std::string& name);
  // A session that ended: nothing of it is kept (a long-lived broker serves endless clients).
  void forget(Session* session) {
    sessions_.erase(session);
    owned_.erase(std::remove_if(owned_.begin(), owned_.end(),
                                [session](const auto& s) { return s.get() == session; }),
                 owned_.end());
  }
  metrics::BrokerMetrics metrics() const;

  BrokerOptions options_;
  polybus::testing::Journal journal_{options_.journal_capacity};
  polybus::testing::FaultRules faults_;
  std::shared_ptr<asio::ssl::context> tls_context_;  // null: plain TCP
  bool answer_pings_ = true;
  // Counted on the io thread, waited for on others.
  mutable std::mutex pongs_mutex_;
  mutable std::condition_variable pongs_changed_;
  std::uint64_t pongs_ = 0;
  IoThread io_;  // before everything that uses its io_context: destroyed after them
  tcp::acceptor acceptor_;
  PortHold port_hold_{io_.context()};  // the port, while stopped
  std::uint16_t port_ = 0;
  std::map<std::string, Topic> topics_;
  std::set<Session*> sessions_;
  std::vector<std::shared_ptr<Session>> owned_;
  std::uint64_t accepted_ = 0;
  std::uint64_t bytes_received_ = 0;
  std::uint64_t bytes_sent_ = 0;
};

}  // namespace polybus::figg::testing
