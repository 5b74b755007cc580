// SPDX-License-Identifier: Apache-2.0
#include "envelope.hpp"

#include <chrono>
#include <random>

#include "polybus/adapter/adapter.hpp"
#include "polybus/cloudevents.hpp"
#include "polybus/error.hpp"

namespace polybus::detail {

void Envelope::configure(const ResolvedOptions& options, std::string scheme, TraceHooks trace,
                         std::function<void(const std::string&)> report) {
  report_ = std::move(report);
  on_ = options.get_string("envelope") == "cloudevents";
  scheme_ = std::move(scheme);
  source_ = options.get_string("envelope_source");
  type_ = options.get_string("envelope_type");
  max_json_depth_ = static_cast<std::size_t>(options.get_int("max_json_depth"));
  trace_ = std::move(trace);
  std::random_device random;
  const std::uint64_t salt = (std::uint64_t{random()} << 32) ^ random();
  char prefix[20];
  std::snprintf(prefix, sizeof prefix, "%016llx-", static_cast<unsigned long long>(salt));
  id_prefix_ = prefix;
}

Status Envelope::encode(std::string_view payload, const Headers& headers, std::string_view type,
                        std::string& out) const {
  // The id and time in buffers: a publish allocates only its envelope.
  char id[48];
  const int id_length = std::snprintf(id, sizeof id, "%s%llu", id_prefix_.c_str(),
                                      static_cast<unsigned long long>(++next_id_));
  char time[cloudevents::kTimeLength + 1];
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const std::size_t time_length = cloudevents::format_time(
      std::chrono::duration_cast<std::chrono::nanoseconds>(now).count(), time);
  auto why = cloudevents::encode(payload, headers,
                                 {std::string_view(id, static_cast<std::size_t>(id_length)),
                                  source_, type, std::string_view(time, time_length)},
                                 max_json_depth_, out);
  if (!why.empty()) return Status(errc::invalid_argument, "envelope=cloudevents: " + why);
  return {};
}

Status Envelope::headers_refused(const char* operation, std::string_view topic) const {
  return Status(errc::not_supported,
                std::string(operation) + " to " + std::string(topic) + " with headers: " + scheme_ +
                    " messages carry none; connect with envelope=cloudevents to send them");
}

Status Envelope::wrap(std::string_view topic, Payloads& payloads, Headers headers) const {
  if (!on_) return headers.empty() ? Status() : headers_refused("publish", topic);
  inject(topic, headers);
  if (payloads.size() == 1) return wrap_in_place(payloads.front(), headers, type_);
  // All or none: an error leaves every payload as it was.
  std::vector<std::string> wrapped(payloads.size());
  for (std::size_t i = 0; i < payloads.size(); ++i)
    if (auto status = encode(payloads[i], headers, type_, wrapped[i]); status) return status;
  for (std::size_t i = 0; i < payloads.size(); ++i) payloads[i] = std::move(wrapped[i]);
  return {};
}

Status Envelope::wrap(std::string_view topic, std::string& payload, Headers headers) const {
  if (!on_) return headers.empty() ? Status() : headers_refused("request", topic);
  inject(topic, headers);
  return wrap_in_place(payload, headers, type_);
}

Status Envelope::wrap_in_place(std::string& payload, const Headers& headers,
                               std::string_view type) const {
  std::string out;
  if (auto status = encode(payload, headers, type, out); status) return status;
  payload = std::move(out);
  return {};
}

Status Envelope::wrap_reply(std::string_view topic, std::string& payload, Headers headers) const {
  if (!on_) return {};
  inject(topic, headers);
  return wrap_in_place(payload, headers, type_ + ".reply");
}

bool Envelope::unwrap(MessageState& message, std::string& why) const {
  cloudevents::Event event;
  why = cloudevents::decode(message.payload, max_json_depth_, event);
  if (!why.empty()) return false;
  message.headers = std::move(event.headers);
  if (event.payload.empty()) {
    message.payload = {};
  } else if (event.payload.data() == event.storage.data()) {
    message.unwrapped = std::move(event.storage);
    message.payload = message.unwrapped;
  } else {
    message.payload = event.payload;  // a view into the buffer the message keeps
  }
  return true;
}

bool Envelope::unwrap(std::string& payload, Headers& headers, std::string& why) const {
  cloudevents::Event event;
  why = cloudevents::decode(payload, max_json_depth_, event);
  if (!why.empty()) return false;
  headers = std::move(event.headers);
  payload = std::string(event.payload);
  return true;
}

void Envelope::inject(std::string_view topic, Headers& headers) const {
  if (!trace_.inject) return;
  try {
    trace_.inject(topic, headers);
  } catch (const std::exception& e) {
    if (report_)
      report_("the trace hook inject threw for " + std::string(topic) + ": " + e.what() +
              " (sent without its trace context)");
  } catch (...) {
    if (report_)
      report_("the trace hook inject threw a non-standard exception for " + std::string(topic) +
              " (sent without its trace context)");
  }
}

std::shared_ptr<void> Envelope::extract(const Message& message) const {
  if (!trace_.extract) return nullptr;
  try {
    return trace_.extract(message);
  } catch (const std::exception& e) {
    if (report_)
      report_("the trace hook extract threw on " + message.topic() + ": " + e.what() +
              " (the handler runs without its scope)");
  } catch (...) {
    if (report_)
      report_("the trace hook extract threw a non-standard exception on " + message.topic() +
              " (the handler runs without its scope)");
  }
  return nullptr;
}

}  // namespace polybus::detail
