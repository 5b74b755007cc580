// SPDX-License-Identifier: Apache-2.0
// HTTP long polling as a link. Requests are POSTs on kept-alive TCP connections: one answered
// leaves its connection for the next request (so two connections serve a whole session, where
// a connection per request cost a handshake each way and a TIME_WAIT per poll). A connection the
// server ends while idle is dropped; one it ends as a request goes out, before any byte of the
// answer, is taken for that race and the request goes again, once, on a new connection.
// The first carries /qio/hostname:1=null with connect=true; its answer
// names the host every later request goes to. Then: at most two requests outstanding, the held
// poll and one carrying events; events gathered while two are out wait for one to finish and
// go together in one POST; each POST leaves 0..poll_delay_max after the last response (or after
// the events were given, when only the held poll is out). The server completes the held poll
// when a newer request arrives, so the newest request is always the one it holds.
// close() is like a stream's close_after_flush: events already given still go out (see close).
#pragma once

#include <asio/steady_timer.hpp>
#include <deque>
#include <map>
#include <random>
#include <vector>

#include "http_exchange.hpp"
#include "link.hpp"
#include "polybus/io/transport.hpp"

namespace polybus::quickio::detail {

struct HttpLinkSettings {
  std::string path;  // the URL's path ("" → "/")
  std::chrono::milliseconds poll_delay_max{2000};
  std::chrono::milliseconds request_timeout{60000};
  std::size_t max_response_size = 16 * 1024 * 1024;
};

class HttpLink : public Link, public std::enable_shared_from_this<HttpLink> {
 public:
  HttpLink(const Strand& strand, TransportSettings transport, HostPort target,
           HttpLinkSettings settings, LinkHandler& handler, const AdapterContext* stats);
  ~HttpLink() override;

  void start() override;
  void send(std::string_view event, WrittenFn written) override;
  void close() override;
  void fail(std::error_code ec, const std::string& detail) override;
  std::string endpoint() const override { return target_.to_string(); }
  std::size_t unsent_bytes() const override;
  std::vector<UnsentEvent> take_unsent() override { return std::move(unsent_); }

 private:
  struct Request;
  struct Channel;  // one TCP connection, and the request it carries (none while idle)
  void issue(bool handshake, std::string body, std::vector<WrittenFn> written = {});
  // On an idle connection to the target if there is one, else on a new one.
  void attach(const std::shared_ptr<Request>& request);
  void open_channel(const std::shared_ptr<Request>& request);
  void drop_channel(const std::shared_ptr<Channel>& channel);
  bool same_target(const Channel& channel) const;
  void on_channel_closed(const std::shared_ptr<Channel>& channel, std::error_code ec,
                         const std::string& detail);
  void on_response(const std::shared_ptr<Request>& request);
  void after_response();
  void schedule_post();
  std::string take_post_body(std::vector<WrittenFn>& written);
  static constexpr std::size_t kMaxPostBody = 1 << 20;
  void end_all();

  Strand strand_;
  TransportSettings transport_settings_;
  HostPort target_;
  HttpLinkSettings settings_;
  LinkHandler& handler_;
  std::optional<AdapterContext> stats_;
  std::mt19937_64 random_;
  std::string sid_;
  std::map<std::uint64_t, std::shared_ptr<Request>> requests_;
  // At most one per request out (two) and one for close()'s last POST; idle ones are reused.
  std::vector<std::shared_ptr<Channel>> channels_;
  std::uint64_t next_request_ = 1;
  asio::steady_timer post_timer_;
  bool post_scheduled_ = false;
  std::string outgoing_;                    // events for the next POST, '\n'-separated
  std::deque<WrittenFn> outgoing_written_;  // one per event in outgoing_ (may be empty)
  std::vector<UnsentEvent> unsent_;         // kept by fail() for take_unsent()
  void keep_unsent();
  bool open_ = false;
  bool ended_ = false;
};

}  // namespace polybus::quickio::detail
