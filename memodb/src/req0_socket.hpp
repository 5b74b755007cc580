// SPDX-License-Identifier: Apache-2.0
// Internal: NNG's req0 protocol of our own, over Asio, on the client's strand: one connection at
// a time to a rep0 peer (TCP or IPC), through the sans-IO SP codec (polybus/memodb/sp.hpp), and
// any number of exchanges (a request and its reply) multiplexed on it by request ID.
//
// Why not libnng: Debian 12's libnng 1.5.2 stalls its process-wide reaper when a TCP pipe is
// closed while a partial read completes (NNG #1636, fixed in 1.6.0); after one reset
// mid-message, no NNG socket of the process ever sees a pipe go or dials again
// (docs/memodb.md).
//
// Exchanges behave as req0's contexts: one waiting for a connection is written when one is up;
// one whose connection drops before its reply is sent again on the next (resend > 0), or fails
// with errc::disconnected (resend 0: memo01's RESULT must never go twice); one unanswered for
// its resend time is sent again on the same connection. The socket does not reconnect by
// itself: its owner decides when (connect()), after its backoff.
#pragma once

#include <asio/generic/stream_protocol.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/steady_timer.hpp>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "polybus/adapter/adapter.hpp"
#include "polybus/memodb/sp.hpp"

namespace polybus::memodb::detail {

struct Req0Settings {
  std::string address;  // tcp://host:port, tcp://[v6]:port or ipc:///path (as NNG writes them)
  std::size_t max_message = 16 << 20;
  std::chrono::milliseconds connect_timeout{5000};  // the TCP connect and the SP headers
  // A message begun and not finished within this drops the connection (limit_exceeded).
  std::chrono::milliseconds frame_timeout{30'000};
  // A write that makes no progress for this long drops the connection (0: never).
  std::chrono::milliseconds write_timeout{10'000};
};

class Req0Socket : public std::enable_shared_from_this<Req0Socket> {
 public:
  struct Events {
    std::function<void()> connected;  // the SP headers are exchanged
    // The attempt failed, or the connection ended (was_up), with the cause.
    std::function<void(std::error_code, const std::string& detail, bool was_up)> ended;
    std::function<void(std::size_t bytes)> bytes_in;
  };
  using Sent = std::function<void()>;
  using Replied = std::function<void(std::error_code, std::string reply, std::string detail)>;
  using ExchangeId = std::uint64_t;
  using TimePoint = std::chrono::steady_clock::time_point;

  // Throws polybus::Error (invalid_url) for an address it cannot use.
  Req0Socket(const Strand& strand, Req0Settings settings, Events events);

  // Starts a connection attempt unless one is up or under way.
  void connect();
  bool up() const { return up_; }
  // Drops the connection and every exchange (replied with errc::closed); nothing more happens.
  void close();

  // Sends `request` (memo01's bytes) and waits for its reply. `sent` runs when the request
  // first reaches a connection's socket; `replied` exactly once: with the reply, or with why
  // none will come (disconnected: dropped with resend 0; timeout: give_up passed; closed).
  // resend: unanswered this long, the request goes again (0: never, not even on the next
  // connection). give_up: the exchange fails with timeout after this long (0: never).
  ExchangeId exchange(std::string request, std::chrono::milliseconds resend,
                      std::chrono::milliseconds give_up, Sent sent, Replied replied);
  // Ends an exchange now (its reply, if it comes, is dropped); `replied` gets `why` from the
  // strand's queue, not from within this call.
  void cancel(ExchangeId id, std::error_code why, std::string detail);

 private:
  struct Exchange {
    std::uint32_t request_id = 0;
    std::shared_ptr<const std::string> frame_body;  // the request ID and the request
    std::chrono::milliseconds resend{0};
    Sent sent;
    Replied replied;
    bool written = false;       // on the current connection (waiting for its reply)
    bool ever_written = false;  // `sent` has run
    std::chrono::milliseconds give_up{0};
    TimePoint give_up_at = TimePoint::max();  // fails with timeout then
    TimePoint resend_at = TimePoint::max();   // written and unanswered: sent again then
  };
  struct Link;  // one connection

  void start_attempt();
  void link_up();
  void link_ended(std::error_code why, std::string detail);
  void frame_clock(Link& link, bool completed);
  void write(ExchangeId id);
  void write_next();
  void watch_write(Link& link);  // write_timeout's watchdog
  void on_message(std::string message);
  void watch_deadline(TimePoint due);  // the exchanges' watchdog: give_up and resend
  void on_deadline();
  void finish(ExchangeId id, std::error_code ec, std::string reply, std::string detail);
  std::uint32_t next_request_id();

  Strand strand_;
  Req0Settings settings_;
  Events events_;
  sp::Carrier carrier_;
  std::string host_, port_, path_;
  std::shared_ptr<Link> link_;
  bool up_ = false;
  bool closed_ = false;
  std::uint32_t id_counter_;
  ExchangeId next_exchange_ = 0;
  std::map<ExchangeId, Exchange> exchanges_;  // in the order they were made
  std::map<std::uint32_t, ExchangeId> by_request_id_;
  // Writes of the current connection: a frame's prefix (or the SP header), its body (shared with
  // the exchange, so a resend copies nothing), and the exchange it carries (0: the header).
  struct Write {
    std::string head;
    std::shared_ptr<const std::string> body;
    ExchangeId exchange = 0;
  };
  std::deque<Write> writes_;
  bool writing_ = false;
  // One timer for every exchange's give_up and resend times, not two per exchange: armed for the
  // earliest (and moved only when a sooner one comes), it looks at them all when it fires. A
  // stream of exchanges answered in time then creates, arms and cancels no timer per exchange.
  asio::steady_timer deadline_timer_;
  TimePoint deadline_armed_for_ = TimePoint::max();
};

}  // namespace polybus::memodb::detail
