// SPDX-License-Identifier: Apache-2.0
// One HTTP long-polling client: its events wait in a queue until a held POST (the long poll)
// carries them out.
#pragma once

#include <memory>
#include <string>

#include "server_impl.hpp"

namespace polybus::quickio::testing {

class HttpSession final : public Peer {
 public:
  HttpSession(ServerImpl& server, std::string sid);

  void write_event(std::string_view text) override;
  void close_transport() override;
  // The connection of the held poll, if any, is reset; the session ends.
  void reset_transport() override;
  // Until `delay` has passed, a poll is answered empty and events wait in the queue.
  void hold_output(std::chrono::milliseconds delay) override;

  // A new POST on connection (its response slot response_id): the previous held poll is
  // completed with what is queued, and this one is held (answered at once if events are queued).
  void hold(const std::shared_ptr<Connection>& connection, std::uint64_t response_id);
  // Answers the held poll with everything queued (possibly nothing).
  void complete_held();
  bool has_held() const { return held_; }
  // Ends the session once what is queued (a /qio/move, say) has gone out: at once when a poll
  // is held, else when the next POST collects it. Until then it gets no more events.
  void end_after_delivery();
  bool ending() const { return ending_; }

  const std::string sid;
  Clock::time_point last_post;
  Clock::time_point held_since;

 private:
  void schedule_flush();

  std::string queue_;  // events, each ending in '\n'
  std::weak_ptr<Connection> held_connection_;
  std::uint64_t held_response_ = 0;
  bool held_ = false;
  bool ending_ = false;
  bool flush_scheduled_ = false;
  asio::steady_timer hold_timer_;
  bool output_held_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace polybus::quickio::testing
