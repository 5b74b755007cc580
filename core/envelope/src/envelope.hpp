// SPDX-License-Identifier: Apache-2.0
// Internal: the client's envelope (envelope=cloudevents): wraps what it publishes, requests and
// replies with its headers, unwraps what it receives, and runs the trace hooks. With the envelope
// off payloads pass untouched and headers are refused, never dropped.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "polybus/adapter/payloads.hpp"
#include "polybus/client.hpp"
#include "polybus/headers.hpp"
#include "polybus/options.hpp"
#include "polybus/status.hpp"

namespace polybus::detail {

struct MessageState;

class Envelope {
 public:
  // `report` is told what a trace hook threw: the operation goes on without trace context (or
  // the handler without the hook's scope), since a tracing failure is no reason to lose it.
  void configure(const ResolvedOptions& options, std::string scheme, TraceHooks trace,
                 std::function<void(const std::string&)> report);
  bool on() const { return on_; }

  // Runs the inject hook, then replaces each payload by its envelope. An error is the caller's
  // (a header the envelope cannot carry, headers with the envelope off); nothing is changed then.
  Status wrap(std::string_view topic, Payloads& payloads, Headers headers) const;
  Status wrap(std::string_view topic, std::string& payload, Headers headers) const;
  // A reply: the envelope's defaults, the inject hook and `headers` (the client's own: a
  // correlation id over topics), no headers of the application's.
  Status wrap_reply(std::string_view topic, std::string& payload, Headers headers = {}) const;

  // Replaces the message's payload by the envelope's data and sets its headers. False, with the
  // message left raw, when the payload is not a valid envelope (why says where).
  bool unwrap(MessageState& message, std::string& why) const;
  // The same for a reply payload.
  bool unwrap(std::string& payload, Headers& headers, std::string& why) const;

  // The extract hook's scope for one handler run (null without a hook).
  std::shared_ptr<void> extract(const Message& message) const;

 private:
  // The envelope of one payload, appended to out.
  Status encode(std::string_view payload, const Headers& headers, std::string_view type,
                std::string& out) const;
  Status wrap_in_place(std::string& payload, const Headers& headers, std::string_view type) const;
  // The inject hook, its throw reported.
  void inject(std::string_view topic, Headers& headers) const;
  // not_supported: headers given with the envelope off.
  Status headers_refused(const char* operation, std::string_view topic) const;

  bool on_ = false;
  std::string scheme_;
  std::string source_;
  std::string type_;
  std::size_t max_json_depth_ = 64;
  TraceHooks trace_;
  std::function<void(const std::string&)> report_;
  std::string id_prefix_;  // random per client: ids from two clients never meet
  mutable std::atomic<std::uint64_t> next_id_{0};
};

}  // namespace polybus::detail
