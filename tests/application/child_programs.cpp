// SPDX-License-Identifier: Apache-2.0
#include "child_programs.hpp"

#include <unistd.h>

#include <asio/io_context.hpp>
#include <cstdio>
#include <memory>

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
}  // namespace

int run_child_program(const std::string& name) {
  if (name == "io-context-destroyed-first") return io_context_destroyed_first();
  if (name == "io-context-destroyed-after-close") return io_context_destroyed_after_close();
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
