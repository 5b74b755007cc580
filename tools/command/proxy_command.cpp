// SPDX-License-Identifier: Apache-2.0
// proxy: a fault proxy (polybus/fault_proxy.hpp) between clients and a broker, for tests written
// in any language. The faults given as flags hold from the start; lines on standard input change
// them while traffic flows (docs/testing.md has the protocol).
#include <unistd.h>

#include <csignal>
#include <iostream>
#include <sstream>
#include <thread>

#include "commands.hpp"
#include "polybus/fault_proxy.hpp"
#include "polybus/tools/args.hpp"

namespace polybus::cli {

namespace {

using testing::Direction;
using testing::FaultProxy;
using testing::Faults;

const char* kUsage =
    R"(usage: polybus proxy LISTEN UPSTREAM [faults] [--direction both|up|down] [--seed N]
                     [--allow-remote]
Forwards TCP connections from LISTEN ([HOST:]PORT; 127.0.0.1 unless given, port 0: a free one)
to UPSTREAM (HOST:PORT) with faults, and prints the address it listens on as its first line.
faults (for the direction --direction names: up is client to server, down is back; both):
  --latency MS  --jitter MS  --bandwidth KIBPS  --reset-after BYTES  --slice BYTES
  --slice-delay MS  --blackhole
Then one command per line on standard input, each answered "ok" or "error: ..." on a line:
  set [up|down|both] KEY VALUE ...   KEY: latency jitter bandwidth reset-after slice
                                     slice-delay (numbers as above), blackhole on|off
  clear [up|down|both]               no faults
  reset                              reset every open connection now (RST both ways)
  half-close up|down                 the receiver of that direction gets a FIN now
  refuse MS                          reset new connections for MS milliseconds (0: stop)
  counters                           one JSON line of byte and connection counters
  quit                               exit (as SIGINT and SIGTERM do; end of input does not)
)";

std::pair<std::string, std::uint16_t> host_port(const std::string& text, const char* what,
                                                bool host_optional) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos && !host_optional)
    throw UsageError(std::string(what) + " '" + text + "' is not HOST:PORT");
  std::string host = colon == std::string::npos ? "127.0.0.1" : text.substr(0, colon);
  if (host.size() > 1 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  const std::string port = colon == std::string::npos ? text : text.substr(colon + 1);
  char* end = nullptr;
  const unsigned long value = std::strtoul(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || value > 65535)
    throw UsageError(std::string(what) + " '" + text + "': the port must be 0-65535");
  return {host.empty() ? "127.0.0.1" : host, static_cast<std::uint16_t>(value)};
}

std::uint64_t parse_number(const std::string& key, const std::string& value) {
  char* end = nullptr;
  const unsigned long long n = std::strtoull(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || value[0] == '-')
    throw UsageError(key + " takes a non-negative whole number, not '" + value + "'");
  return n;
}

// One fault by the name the flags and the set command share.
void apply(Faults& f, const std::string& key, const std::string& value) {
  if (key == "blackhole") {
    if (value != "on" && value != "off") throw UsageError("blackhole takes on or off");
    f.blackhole = value == "on";
    return;
  }
  const auto n = parse_number(key, value);
  if (key == "latency")
    f.latency = std::chrono::milliseconds(n);
  else if (key == "jitter")
    f.jitter = std::chrono::milliseconds(n);
  else if (key == "bandwidth")
    f.bytes_per_second = n * 1024;
  else if (key == "reset-after")
    f.reset_after_bytes = n;
  else if (key == "slice")
    f.slice_bytes = static_cast<std::size_t>(n);
  else if (key == "slice-delay")
    f.slice_delay = std::chrono::milliseconds(n);
  else
    throw UsageError("no fault named '" + key + "'");
}

std::vector<Direction> directions(const std::string& which) {
  if (which == "up") return {Direction::to_upstream};
  if (which == "down") return {Direction::to_client};
  if (which == "both") return {Direction::to_upstream, Direction::to_client};
  throw UsageError("direction '" + which + "' is not up, down or both");
}

std::string counters_json(const testing::FaultProxyCounters& c) {
  auto flow = [](const testing::FaultProxyCounters::Flow& f) {
    return "{\"read\":" + std::to_string(f.read) + ",\"forwarded\":" + std::to_string(f.forwarded) +
           ",\"discarded\":" + std::to_string(f.discarded) + "}";
  };
  return "{\"up\":" + flow(c.to_upstream) + ",\"down\":" + flow(c.to_client) +
         ",\"accepted\":" + std::to_string(c.accepted) + ",\"active\":" + std::to_string(c.active) +
         ",\"refused\":" + std::to_string(c.refused) + ",\"resets\":" + std::to_string(c.resets) +
         ",\"upstream_failures\":" + std::to_string(c.upstream_failures) + "}";
}

// One line of the stdin protocol; returns the answer. Throws UsageError for a bad line.
std::string run_line(FaultProxy& proxy, const std::string& line, bool& quit) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  if (words.empty()) return "";
  const std::string& verb = words[0];
  if (verb == "quit") {
    quit = true;
    return "ok";
  }
  if (verb == "counters") return counters_json(proxy.counters());
  if (verb == "reset") {
    proxy.reset_connections();
    return "ok";
  }
  if (verb == "refuse") {
    if (words.size() != 2) throw UsageError("refuse takes one number of milliseconds");
    proxy.refuse_connections(std::chrono::milliseconds(parse_number("refuse", words[1])));
    return "ok";
  }
  if (verb == "half-close") {
    if (words.size() != 2 || words[1] == "both") throw UsageError("half-close takes up or down");
    proxy.close_one_side(directions(words[1]).front());
    return "ok";
  }
  if (verb == "clear" || verb == "set") {
    std::size_t at = 1;
    std::string which = "both";
    if (at < words.size() && (words[at] == "up" || words[at] == "down" || words[at] == "both"))
      which = words[at++];
    if (verb == "clear") {
      if (at != words.size()) throw UsageError("clear takes at most a direction");
      for (auto d : directions(which)) proxy.set_faults(d, Faults{});
      return "ok";
    }
    if (at == words.size() || (words.size() - at) % 2 != 0)
      throw UsageError("set takes KEY VALUE pairs");
    for (auto d : directions(which)) {
      Faults f = proxy.faults(d);
      for (std::size_t i = at; i < words.size(); i += 2) apply(f, words[i], words[i + 1]);
      proxy.set_faults(d, f);
    }
    return "ok";
  }
  throw UsageError("unknown command '" + verb + "'");
}

}  // namespace

int run_proxy(const Argv& argv) {
  Args args(argv,
            {"latency", "jitter", "bandwidth", "reset-after", "slice", "slice-delay", "direction",
             "seed"},
            {"blackhole", "allow-remote"});
  if (args.help()) {
    std::cout << kUsage;
    return 0;
  }
  const auto [listen_host, listen_port] = host_port(args.positional(0, "LISTEN"), "LISTEN", true);
  const auto [upstream_host, upstream_port] =
      host_port(args.positional(1, "UPSTREAM"), "UPSTREAM", false);
  if (args.positional().size() > 2)
    throw UsageError("unexpected argument '" + args.positional()[2] + "'");
  Faults initial;
  for (const char* key : {"latency", "jitter", "bandwidth", "reset-after", "slice", "slice-delay"})
    if (auto v = args.value(key)) apply(initial, key, *v);
  initial.blackhole = args.has("blackhole");

  testing::FaultProxyOptions options;
  options.listen_host = listen_host;
  options.listen_port = listen_port;
  options.upstream_host = upstream_host;
  options.upstream_port = upstream_port;
  options.allow_non_loopback = args.has("allow-remote");
  options.seed = args.number("seed", 1, 0, UINT64_MAX);
  block_termination_signals();
  std::unique_ptr<FaultProxy> proxy;
  try {
    proxy = std::make_unique<FaultProxy>(options);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string(e.what()) + " (--allow-remote)");
  }
  for (auto d : directions(args.value("direction").value_or("both"))) proxy->set_faults(d, initial);
  std::cout << proxy->address() << std::endl;

  // Commands on stdin; the main thread waits for a signal, which "quit" raises.
  std::thread commands([&proxy] {
    for (std::string line; std::getline(std::cin, line);) {
      bool quit = false;
      std::string answer;
      try {
        answer = run_line(*proxy, line, quit);
      } catch (const std::exception& e) {
        answer = std::string("error: ") + e.what();
      }
      if (!answer.empty()) std::cout << answer << std::endl;
      if (quit) {
        kill(getpid(), SIGTERM);
        return;
      }
    }
  });
  commands.detach();  // blocked in getline at exit; the process ends with it
  wait_for_termination_signal();
  proxy->stop();
  std::cout.flush();
  _exit(0);  // the detached reader may still hold std::cin
}

}  // namespace polybus::cli
