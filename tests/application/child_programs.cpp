// SPDX-License-Identifier: Apache-2.0
#include "child_programs.hpp"

#include <unistd.h>

#include <asio/io_context.hpp>
#include <atomic>
#include <cstdio>
#include <future>
#include <memory>
#include <stdexcept>

#include "polybus/polybus.hpp"

namespace polybus::test {

namespace {
// The application destroys its io_context while a client it gave that io_context still exists:
// the client's timers and strand belong to that io_context, so this must end the process with
// the rule named, not go on into a use-after-free.
int io_context_destroyed_first() {
  auto io = std::make_unique<asio::io_context>();
  ConnectOptions options;
  options.io_context = io.get();
  Client client = connect("mem://io-context-destroyed-first", options);
  io.reset();
  std::fputs("the io_context was destroyed and the process went on\n", stderr);
  return 0;
}

// The same, with a client closed first: a closed client still holds its strand.
int io_context_destroyed_after_close() {
  auto io = std::make_unique<asio::io_context>();
  ConnectOptions options;
  options.io_context = io.get();
  Client client = connect("mem://io-context-destroyed-after-close", options);
  client.close({}, {});
  io->run();
  io.reset();
  std::fputs("the io_context was destroyed and the process went on\n", stderr);
  return 0;
}
// A handler that keeps failing until max_attempts discards its message. Without a log sink the
// discard must reach stderr; with one, the sink gets it and stderr nothing.
int failing_handler(bool with_sink) {
  ConnectOptions options;
  std::atomic<int> logged{0};
  if (with_sink) options.log = [&logged](LogLevel, std::string_view) { ++logged; };
  Client client = connect("mem://failing-handler?max_attempts=2&requeue_delay=0", options);
  std::promise<void> discarded;
  SubscribeOptions subscribe_options;
  subscribe_options.on_discard = [&discarded](const Message&) { discarded.set_value(); };
  auto sub = client.subscribe("work", subscribe_options, [](Message&) {
    throw std::runtime_error("the handler keeps failing");
  });
  if (sub.wait_ready(std::chrono::seconds(10))) return 3;
  if (client.publish_sync("work", "job")) return 4;
  if (discarded.get_future().wait_for(std::chrono::seconds(10)) != std::future_status::ready)
    return 5;
  if (client.close_sync(std::chrono::seconds(5))) return 6;
  if (with_sink && logged.load() == 0) return 7;
  return 0;
}
}  // namespace

int run_child_program(const std::string& name) {
  if (name == "io-context-destroyed-first") return io_context_destroyed_first();
  if (name == "io-context-destroyed-after-close") return io_context_destroyed_after_close();
  if (name == "failing-handler-no-log") return failing_handler(false);
  if (name == "failing-handler-with-log") return failing_handler(true);
  std::fprintf(stderr, "no child program named %s\n", name.c_str());
  return 2;
}

ChildResult run_child(const std::string& name) {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  ChildResult result;
  if (n <= 0) return result;
  self[n] = '\0';
  const std::string command = "'" + std::string(self) + "' --child " + name + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return result;
  char buffer[4096];
  std::size_t got;
  while ((got = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) result.output.append(buffer, got);
  result.wait_status = pclose(pipe);
  return result;
}

}  // namespace polybus::test
