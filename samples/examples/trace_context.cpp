// SPDX-License-Identifier: Apache-2.0
// Trace context across a broker without a tracing library: a hand-written W3C traceparent
// (https://www.w3.org/TR/trace-context/) travels in the CloudEvents envelope. The inject hook
// adds the publisher's span to every publish; the extract hook reads it before each handler and
// opens a child span for the handler's run, closed when the handler returns. An OpenTelemetry
// propagator fits the same two hooks. Run with a URL, e.g.
//   example_trace_context mem://trace
//   example_trace_context nsq://127.0.0.1:4150
// Exits 0 when the handler ran inside a span of the publisher's trace.
#include <condition_variable>
#include <iostream>
#include <mutex>
#include <random>

#include "polybus/all.hpp"

namespace {

std::string random_hex(std::size_t digits) {
  static std::mutex mutex;
  static std::mt19937_64 random{std::random_device{}()};
  std::lock_guard<std::mutex> lock(mutex);
  std::string out;
  while (out.size() < digits) {
    char chunk[17];
    std::snprintf(chunk, sizeof chunk, "%016llx", static_cast<unsigned long long>(random()));
    out += chunk;
  }
  return out.substr(0, digits);
}

// "00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>"; false for anything else.
bool parse_traceparent(std::string_view text, std::string& trace_id, std::string& parent_id) {
  auto hex = [](std::string_view s) {
    return s.find_first_not_of("0123456789abcdef") == std::string_view::npos;
  };
  if (text.size() != 55 || text.substr(0, 3) != "00-" || text[35] != '-' || text[52] != '-')
    return false;
  trace_id = std::string(text.substr(3, 32));
  parent_id = std::string(text.substr(36, 16));
  return hex(trace_id) && hex(parent_id) && hex(text.substr(53, 2)) &&
         trace_id != std::string(32, '0') && parent_id != std::string(16, '0');
}

// The span a thread is in: what a tracing library keeps as its "current context".
struct Span {
  std::string trace_id, span_id, parent_id;
};
thread_local const Span* current_span = nullptr;

}  // namespace

int main(int argc, char* argv[]) {
  polybus::register_all_schemes();
  std::string url = argc > 1 ? argv[1] : "mem://trace";
  url += (url.find('?') == std::string::npos ? "?" : "&") + std::string("envelope=cloudevents");

  const Span publisher_span{random_hex(32), random_hex(16), {}};
  polybus::ConnectOptions options;
  options.trace.inject = [&](std::string_view, polybus::Headers& headers) {
    headers.set("traceparent",
                "00-" + publisher_span.trace_id + "-" + publisher_span.span_id + "-01");
  };
  options.trace.extract = [](const polybus::Message& m) -> std::shared_ptr<void> {
    auto span = std::make_shared<Span>();
    auto traceparent = m.headers().get("traceparent");
    if (!traceparent || !parse_traceparent(*traceparent, span->trace_id, span->parent_id))
      span->trace_id = random_hex(32);  // no valid context: a new trace
    span->span_id = random_hex(16);
    current_span = span.get();
    std::cout << "span " << span->span_id << " of trace " << span->trace_id << " opened (parent "
              << (span->parent_id.empty() ? "none" : span->parent_id) << ")\n";
    // Released after the handler returned: the span ends there.
    return std::shared_ptr<void>(span.get(), [span](void*) {
      std::cout << "span " << span->span_id << " closed\n";
      current_span = nullptr;
    });
  };
  auto client = polybus::connect(url, options);

  std::mutex mutex;
  std::condition_variable cv;
  bool done = false, in_trace = false;
  auto subscription = client.subscribe("traced", {}, [&](polybus::Message& m) {
    const Span* span = current_span;
    std::cout << "handling '" << m.payload() << "' in span "
              << (span ? span->span_id : std::string("(none)")) << "\n";
    std::lock_guard<std::mutex> lock(mutex);
    in_trace = span && span->trace_id == publisher_span.trace_id &&
               span->parent_id == publisher_span.span_id;
    done = true;
    cv.notify_one();
  });
  if (auto status = subscription.wait_ready(std::chrono::seconds(10))) {
    std::cerr << "subscribe failed: " << status.message() << "\n";
    return 1;
  }
  if (auto status = client.publish_sync("traced", "hello")) {
    std::cerr << "publish failed: " << status.message() << "\n";
    return 1;
  }
  std::unique_lock<std::mutex> lock(mutex);
  cv.wait_for(lock, std::chrono::seconds(10), [&] { return done; });
  lock.unlock();
  client.close_sync(std::chrono::seconds(5));
  std::cout << (in_trace ? "the handler ran in the publisher's trace\n"
                         : "the handler ran outside the publisher's trace\n");
  return in_trace ? 0 : 1;
}
