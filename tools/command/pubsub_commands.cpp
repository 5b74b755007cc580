// SPDX-License-Identifier: Apache-2.0
// pub and sub.
#include <iostream>
#include <mutex>

#include "commands.hpp"
#include "polybus/polybus.hpp"
#include "polybus/text/text.hpp"
#include "polybus/tools/args.hpp"
#include "polybus/tools/metrics_endpoint.hpp"
#include "polybus/tools/windowed_publisher.hpp"

namespace polybus::cli {
namespace {

const char* kPubUsage = R"(usage: polybus pub URL TOPIC [MSG...] [--count N --size B] [--timeout MS]
                        [--header KEY=VALUE]...
Publishes each MSG; with no MSG, each line of standard input; with --count, N generated payloads
of B bytes (default 100), each beginning with its sequence number. Exits 1 if any publish failed.
--timeout bounds each publish; by default the URL's op_timeout (10 s unless set there).
--header (repeatable) sends a header with every message; headers travel in a CloudEvents
envelope, so the URL needs envelope=cloudevents. KEY is a CloudEvents attribute name (a-z, 0-9).
)";

const char* kSubUsage = R"(usage: polybus sub URL TOPIC [--group G] [--count N] [--from OFFSET]
                        [--headers] [--dead-letter TOPIC] [--max-attempts N]
                        [--batch N [--batch-wait MS]] [--metrics HOST:PORT]
Prints each payload on its own line; exits after N messages when --count is given, else at
SIGINT or SIGTERM. Says on standard error when the subscription is confirmed.
--headers prints each message's headers as one JSON object on the line before its payload ({}
when it has none; with envelope=cloudevents in the URL, the envelope's attributes).
--dead-letter sends a message that was delivered more than --max-attempts times (default 5)
to TOPIC, then acknowledges it.
--batch takes messages in batches of up to N (subscribe_batch, with max_in_flight N), handed
over when full, --batch-wait ms (default 100) after their first message, or when the broker
will send no more; each batch is acknowledged once printed.
--metrics serves the client's metrics at http://HOST:PORT/metrics (Prometheus text format;
port 0 takes a free port, printed on standard error).
)";

Headers parse_headers(const Args& args) {
  Headers headers;
  for (const auto& given : args.values("header")) {
    const auto eq = given.find('=');
    if (eq == std::string::npos || eq == 0)
      throw UsageError("--header wants KEY=VALUE, got '" + given + "'");
    headers.set(given.substr(0, eq), given.substr(eq + 1));
  }
  return headers;
}

std::string headers_json(const Headers& headers) {
  std::string out = "{";
  for (const auto& [name, value] : headers) {
    if (out.size() > 1) out += ',';
    text::append_json_quoted(out, name);
    out += ':';
    text::append_json_quoted(out, value);
  }
  return out + "}";
}

}  // namespace

int run_pub(const Argv& argv) {
  Args args(argv, {"count", "size", "timeout", "header"});
  if (args.help()) return std::cout << kPubUsage, 0;
  const std::string& url = args.positional(0, "URL");
  const std::string& topic = args.positional(1, "TOPIC");
  // 0: the client's op_timeout, which the URL may set.
  auto timeout = std::chrono::milliseconds(args.number("timeout", 0, 1, 3'600'000));
  if (args.has("count") && args.positional().size() > 2)
    throw UsageError("give either MSG arguments or --count, not both");
  if (args.has("size") && !args.has("count")) throw UsageError("--size goes with --count");
  const Headers headers = parse_headers(args);
  auto client = connect_reporting(url);
  if (!headers.empty() && !client.carries_headers())
    throw UsageError("--header needs envelope=cloudevents in the URL: " + client.scheme() +
                     " messages carry no headers of their own");
  WindowedPublisher publisher(client, topic, timeout);
  publisher.set_headers(headers);
  if (args.has("count")) {
    auto count = args.number("count", 0, 1, 1'000'000'000);
    auto size = args.number("size", 100, 1, 64 << 20);
    for (std::uint64_t i = 0; i < count; ++i) publisher.publish(generated_payload(i, size));
  } else if (args.positional().size() > 2) {
    for (std::size_t i = 2; i < args.positional().size(); ++i)
      publisher.publish(args.positional()[i]);
  } else {
    for (std::string line; std::getline(std::cin, line);) publisher.publish(std::move(line));
  }
  auto failed = publisher.finish();
  if (failed)
    std::cerr << "polybus pub: " << failed << " publish(es) failed: " << publisher.first_error()
              << "\n";
  client.close_sync(timeout.count() > 0 ? timeout : std::chrono::milliseconds(10'000));
  return failed ? 1 : 0;
}

int run_sub(const Argv& argv) {
  Args args(
      argv,
      {"group", "count", "from", "metrics", "dead-letter", "max-attempts", "batch", "batch-wait"},
      {"headers"});
  if (args.help()) return std::cout << kSubUsage, 0;
  const std::string& url = args.positional(0, "URL");
  const std::string& topic = args.positional(1, "TOPIC");
  if (args.positional().size() > 2)
    throw UsageError("unexpected argument '" + args.positional()[2] + "'");
  SubscribeOptions options;
  options.group = args.value("group").value_or("");
  if (args.has("from")) options.from_offset = args.number("from", 0, 0, UINT64_MAX);
  if (args.has("max-attempts") && !args.has("dead-letter"))
    throw UsageError("--max-attempts goes with --dead-letter");
  if (args.has("dead-letter")) {
    options.dead_letter.topic = *args.value("dead-letter");
    options.max_attempts = static_cast<std::uint32_t>(args.number("max-attempts", 5, 1, 65535));
  }
  const bool print_headers = args.has("headers");
  if (args.has("batch-wait") && !args.has("batch"))
    throw UsageError("--batch-wait goes with --batch");
  const auto batch_size = static_cast<std::uint32_t>(args.number("batch", 0, 1, 1'000'000));
  const auto batch_wait = std::chrono::milliseconds(args.number("batch-wait", 100, 1, 3'600'000));
  const std::uint64_t limit = args.number("count", 0, 1, UINT64_MAX);
  if (!limit) block_termination_signals();
  auto client = connect_reporting(url);
  std::mutex mutex;
  std::condition_variable cv;
  std::uint64_t printed = 0;
  options.concurrency = 1;
  auto take = [&](Message& m) {  // with mutex held
    if (limit && printed >= limit) {
      if (client.capabilities().ack) m.nack(std::chrono::milliseconds(0));  // not ours to take
      return;
    }
    if (print_headers) std::cout << headers_json(m.headers()) << '\n';
    std::cout << m.payload() << '\n';
    if (++printed == limit) cv.notify_all();
  };
  Subscription sub;
  if (batch_size) {
    options.max_in_flight = batch_size;
    sub = client.subscribe_batch(topic, options, BatchOptions{batch_size, batch_wait},
                                 [&](Batch& batch) {
                                   std::lock_guard<std::mutex> lock(mutex);
                                   for (Message& m : batch) take(m);
                                   std::cout << std::flush;
                                 });
  } else {
    sub = client.subscribe(topic, options, [&](Message& m) {
      std::lock_guard<std::mutex> lock(mutex);
      take(m);
      std::cout << std::flush;
    });
  }
  // Declared after the client: destroyed first, so no scrape reads a client that is gone.
  auto endpoint = metrics_endpoint_if_asked(args, client);
  if (auto ec = sub.wait_ready(std::chrono::seconds(30))) {
    std::cerr << "polybus sub: subscription failed: " << ec.message() << "\n";
    return 1;
  }
  std::cerr << "polybus sub: subscribed to '" << topic << "' on " << url << std::endl;
  if (limit) {
    std::unique_lock<std::mutex> lock(mutex);
    cv.wait(lock, [&] { return printed >= limit; });
  } else {
    wait_for_termination_signal();
  }
  sub.pause();
  client.close_sync(std::chrono::seconds(5));
  return 0;
}

}  // namespace polybus::cli
