// SPDX-License-Identifier: Apache-2.0
// Internal: one MemoDB client object = one req0 socket of our own (req0_socket.hpp) on the
// client's strand: one connection to the broker, reconnected per the client's backoff policy,
// shared by the requests (requests.hpp) and the workers (workers.hpp), each with its own
// exchanges (the protocol's multiplexing); and the close sequence. Everything here runs on the
// strand.
#pragma once

#include <asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "options.hpp"
#include "polybus/adapter/adapter.hpp"
#include "polybus/io/reconnect.hpp"
#include "req0_socket.hpp"
#include "requests.hpp"
#include "workers.hpp"

namespace polybus::memodb::detail {

class Connection : public MessageBackend, public std::enable_shared_from_this<Connection> {
 public:
  Connection(const AdapterContext& context, ConnectionSettings settings);
  ~Connection() override;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Starts connecting. Throws polybus::Error for an address it cannot use.
  void open();

  // Adapter work (strand).
  void request(RequestWork work) { requests_.request(std::move(work)); }
  std::shared_ptr<AdapterSubscription> serve(const std::string& service, std::uint32_t workers,
                                             std::shared_ptr<SubscriptionSink> sink);
  void close(Clock::time_point deadline, std::function<void()> done);
  // Drops the connection; whatever is pending completes with closed. Idempotent.
  void shutdown();

  // serve() controls (strand).
  void unsubscribe(std::uint64_t serve, OpCompletion done);
  void set_paused(std::uint64_t serve, bool paused) { workers_.set_paused(serve, paused); }
  void set_workers(std::uint64_t serve, std::uint32_t count) { workers_.set_workers(serve, count); }

  // MessageBackend (strand). Jobs take only reply(); the core refuses the others.
  void ack(polybus::detail::MessageState&) override {}
  void nack(polybus::detail::MessageState&, std::chrono::milliseconds) override {}
  void touch(polybus::detail::MessageState&) override {}
  void reply(polybus::detail::MessageState& message, std::string payload, std::error_code ec,
             std::string detail) override;

 private:
  // The requests and the workers share the socket, the context and the close state.
  friend class Requests;
  friend class Workers;

  void connected();
  void ended(std::error_code why, const std::string& detail, bool was_up);
  // Ends a slot's exchange on purpose: its completion says closed.
  void cancel(Slot& slot);
  void maybe_finish_close();
  void finish_close();

  AdapterContext ctx_;
  ConnectionSettings settings_;
  std::shared_ptr<Req0Socket> socket_;
  ReconnectLoop reconnect_;
  bool closing_ = false;        // no new work; workers leave
  bool close_pending_ = false;  // close() waits for the last exchanges, then shuts down
  bool dead_ = false;           // shut down: the socket is closed
  std::function<void()> close_done_;
  asio::steady_timer close_timer_;
  Requests requests_{*this};
  Workers workers_{*this};
};

}  // namespace polybus::memodb::detail
