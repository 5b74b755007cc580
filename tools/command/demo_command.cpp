// SPDX-License-Identifier: Apache-2.0
// demo: start every registered in-process broker, round-trip messages over its scheme and print
// a table. Exit 1 if any round trip failed.
#include <condition_variable>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <set>

#include "commands.hpp"
#include "polybus/polybus.hpp"
#include "polybus/testing.hpp"
#include "polybus/tools/args.hpp"

namespace polybus::cli {
namespace {

struct Row {
  std::string broker, url, pubsub = "-", request = "-", note;
  double ms = 0;
  bool ok = true;
};

std::string publish_and_receive(Client& client, const std::string& topic, int count) {
  std::mutex mutex;
  std::condition_variable cv;
  std::set<std::string> seen;
  auto sub = client.subscribe(topic, {}, [&](Message& m) {
    std::lock_guard<std::mutex> lock(mutex);
    seen.insert(std::string(m.payload()));
    cv.notify_all();
  });
  if (auto ec = sub.wait_ready(std::chrono::seconds(10))) return "subscribe: " + ec.message();
  for (int i = 0; i < count; ++i)
    if (auto ec = client.publish_sync(topic, "demo message " + std::to_string(i)))
      return "publish: " + ec.message();
  std::unique_lock<std::mutex> lock(mutex);
  if (!cv.wait_for(lock, std::chrono::seconds(10),
                   [&] { return seen.size() >= std::size_t(count); }))
    return "received " + std::to_string(seen.size()) + "/" + std::to_string(count);
  return {};
}

Row run_one(const testing::TestBrokerFactory& factory) {
  Row row;
  row.broker = factory.name;
  auto start = std::chrono::steady_clock::now();
  try {
    auto broker = factory.start();
    row.url = broker->url();
    auto client = polybus::connect(row.url);
    const auto caps = client.capabilities();
    constexpr int kCount = 100;
    if (caps.publish && caps.subscribe) {
      auto error = publish_and_receive(client, "demo-topic", kCount);
      row.pubsub = error.empty() ? std::to_string(kCount) + "/" + std::to_string(kCount) : "FAIL";
      if (!error.empty()) row.ok = false, row.note = error;
    }
    if (caps.request_reply) {
      auto sub = client.serve("demo-service",
                              [](Message& m) { return "re: " + std::string(m.payload()); });
      if (auto ec = sub.wait_ready(std::chrono::seconds(10))) {
        row.request = "FAIL", row.ok = false, row.note = "serve: " + ec.message();
      } else {
        int good = 0;
        for (int i = 0; i < 10; ++i) {
          auto reply = client.request_sync("demo-service", "q" + std::to_string(i),
                                           std::chrono::seconds(10));
          if (!reply.ec && reply.payload == "re: q" + std::to_string(i))
            ++good;
          else if (row.note.empty())
            row.note = "request: " + reply.ec.message() + " " + reply.detail;
        }
        row.request = std::to_string(good) + "/10";
        if (good != 10) row.ok = false;
      }
    }
    if (auto ec = client.close_sync(std::chrono::seconds(5)))
      row.ok = false, row.note = "close: " + ec.message();
  } catch (const std::exception& e) {
    row.ok = false;
    row.note = e.what();
  }
  row.ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return row;
}

}  // namespace

int run_demo(const Argv& argv) {
  Args args(argv, {});
  if (args.help()) {
    std::cout << "usage: polybus demo\nStarts the in-process broker of every registered scheme, "
                 "publishes and consumes 100 messages and makes 10 requests where the scheme can, "
                 "and prints a table.\n";
    return 0;
  }
  if (!args.positional().empty()) throw UsageError("demo takes no arguments");
  std::vector<Row> rows;
  for (const auto& factory : testing::test_brokers()) rows.push_back(run_one(factory));
  std::printf("%-14s %-58s %-9s %-9s %9s  %s\n", "broker", "url", "pub/sub", "request", "ms",
              "result");
  bool all_ok = true;
  for (const auto& r : rows) {
    std::string url = r.url.size() > 58 ? r.url.substr(0, 55) + "..." : r.url;
    std::printf("%-14s %-58s %-9s %-9s %9.1f  %s%s\n", r.broker.c_str(), url.c_str(),
                r.pubsub.c_str(), r.request.c_str(), r.ms, r.ok ? "ok" : "FAILED",
                r.note.empty() ? "" : (" (" + r.note + ")").c_str());
    all_ok = all_ok && r.ok;
  }
  std::printf("%zu scheme(s): %s\n", rows.size(),
              all_ok ? "all round trips succeeded" : "some FAILED");
  return all_ok ? 0 : 1;
}

}  // namespace polybus::cli
