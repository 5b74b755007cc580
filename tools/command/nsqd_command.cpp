// SPDX-License-Identifier: Apache-2.0
// broker nsqd: the in-process nsqd under nsqd 1.3's own command line (flags, spellings, defaults
// and --config TOML file), so that a script, compose file or another client's test suite that
// starts `nsqd` runs against it through a two-line shim. docs/testing.md lists every flag.
#include <unistd.h>
#include <iostream>
#include <stdexcept>
#include <tuple>

#include "commands.hpp"
#include "go_flags.hpp"
#include "polybus/broker_admin.hpp"
#include "polybus/nsq_testing.hpp"

namespace polybus::cli {
namespace {

using nsq::testing::NsqdOptions;
using Kind = GoFlags::Kind;

std::chrono::milliseconds as_ms(const std::string& text, const std::string& flag) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(parse_go_duration(text, flag));
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

void declare_logging_flags(GoFlags& flags);

std::uint64_t positive_bytes(const std::string& text, const std::string& what) {
  const std::int64_t value = parse_go_int(text, what);
  if (value <= 0) throw UsageError("not a size in bytes");
  return static_cast<std::uint64_t>(value);
}

void declare_nsqd_flags(GoFlags& flags, NsqdOptions& o, bool& version) {
  const auto address = [](std::string& host, std::uint16_t& port, const char* flag) {
    return [&host, &port, flag](const std::string& v) {
      std::tie(host, port) = parse_listen_address(v, flag);
    };
  };
  flags.take("version", Kind::boolean,
             [&](const std::string& v) { version = parse_go_bool(v, "-version"); });
  flags.take("config", Kind::value, [](const std::string&) {});
  flags.take("tcp-address", Kind::value, address(o.tcp_host, o.tcp_port, "-tcp-address"));
  flags.take("http-address", Kind::value, [&o](const std::string& v) {
    std::uint16_t port = 0;
    std::tie(o.http_host, port) = parse_listen_address(v, "-http-address");
    o.http_port = port;
  });
  flags.take("broadcast-address", Kind::value,
             [&o](const std::string& v) { o.broadcast_address = v; });
  flags.take("data-path", Kind::value, [&o](const std::string& v) { o.data_path = v; });
  flags.take("mem-queue-size", Kind::value,
             [&o](const std::string& v) { o.mem_queue_size = parse_go_int(v, "-mem-queue-size"); });
  flags.take("msg-timeout", Kind::duration,
             [&o](const std::string& v) { o.msg_timeout = as_ms(v, "-msg-timeout"); });
  flags.take("max-msg-timeout", Kind::duration,
             [&o](const std::string& v) { o.max_msg_timeout = as_ms(v, "-max-msg-timeout"); });
  flags.take("max-req-timeout", Kind::duration,
             [&o](const std::string& v) { o.max_req_timeout = as_ms(v, "-max-req-timeout"); });
  flags.take("max-msg-size", Kind::value,
             [&o](const std::string& v) { o.max_msg_size = parse_go_int(v, "-max-msg-size"); });
  flags.take("max-body-size", Kind::value,
             [&o](const std::string& v) { o.max_body_size = parse_go_int(v, "-max-body-size"); });
  flags.take("max-rdy-count", Kind::value,
             [&o](const std::string& v) { o.max_rdy_count = parse_go_int(v, "-max-rdy-count"); });
  flags.take("max-heartbeat-interval", Kind::duration, [&o](const std::string& v) {
    o.max_heartbeat_interval = as_ms(v, "-max-heartbeat-interval");
  });
  flags.take("max-output-buffer-size", Kind::value, [&o](const std::string& v) {
    o.max_output_buffer_size = parse_go_int(v, "-max-output-buffer-size");
  });
  flags.take("max-output-buffer-timeout", Kind::duration, [&o](const std::string& v) {
    o.max_output_buffer_timeout = as_ms(v, "-max-output-buffer-timeout");
  });
  flags.take("output-buffer-timeout", Kind::duration, [&o](const std::string& v) {
    o.output_buffer_timeout = as_ms(v, "-output-buffer-timeout");
  });
  flags.take("snappy", Kind::boolean,
             [&o](const std::string& v) { o.snappy = parse_go_bool(v, "-snappy"); });
  flags.take("deflate", Kind::boolean,
             [&o](const std::string& v) { o.deflate = parse_go_bool(v, "-deflate"); });
  flags.take("max-deflate-level", Kind::value, [&o](const std::string& v) {
    o.max_deflate_level = static_cast<int>(parse_go_int(v, "-max-deflate-level"));
  });
  flags.take("tls-cert", Kind::value, [&o](const std::string& v) { o.tls_cert_file = v; });
  flags.take("tls-key", Kind::value, [&o](const std::string& v) { o.tls_key_file = v; });
  flags.take("tls-root-ca-file", Kind::value,
             [&o](const std::string& v) { o.tls_root_ca_file = v; });
  flags.take("tls-client-auth-policy", Kind::value, [&o](const std::string& v) {
    using Auth = NsqdOptions::TlsClientAuth;
    // nsqd: require, require-verify; anything else means no client certificate.
    o.tls_client_auth = v == "require"          ? Auth::require
                        : v == "require-verify" ? Auth::require_verify
                                                : Auth::none;
  });
  flags.take("tls-required", Kind::boolean, [&o](const std::string& v) {
    using Required = NsqdOptions::TlsRequired;
    if (v == "tcp-https") {
      o.tls_required = Required::except_http;
      return;
    }
    o.tls_required = parse_go_bool(v, "-tls-required") ? Required::yes : Required::no;
  });
  flags.take("tls-min-version", Kind::value, [&o](const std::string& v) {
    static const std::map<std::string, int> kVersions = {{"ssl3.0", 0x0300},
                                                         {"tls1.0", 0x0301},
                                                         {"tls1.1", 0x0302},
                                                         {"tls1.2", 0x0303},
                                                         {"tls1.3", 0x0304}};
    const auto found = kVersions.find(v);
    if (found == kVersions.end()) throw UsageError("unknown tls version");
    o.tls_min_version = found->second;
  });
  declare_logging_flags(flags);
  flags.take(
      "lookupd-tcp-address", Kind::repeated,
      [&o](const std::string& v) {
        if (v.empty()) return o.lookupd_tcp_addresses.clear();
        o.lookupd_tcp_addresses.push_back(v);
      },
      "nsqlookupd_tcp_addresses");
  const auto port = [](std::uint16_t& out, const char* flag) {
    return [&out, flag](const std::string& v) {
      const std::int64_t value = parse_go_int(v, flag);
      if (value < 0 || value > 65535) throw UsageError("not a port");
      out = static_cast<std::uint16_t>(value);
    };
  };
  flags.take("broadcast-tcp-port", Kind::value, port(o.broadcast_tcp_port, "-broadcast-tcp-port"));
  flags.take("broadcast-http-port", Kind::value,
             port(o.broadcast_http_port, "-broadcast-http-port"));
  flags.refuse("https-address", Kind::value, "the HTTP API is served over plain HTTP only");
  flags.refuse("auth-http-address", Kind::repeated,
               "AUTH checks a shared secret (NsqdOptions::auth_secret), not an auth server",
               "auth_http_addresses");
  flags.take("max-bytes-per-file", Kind::value, [&o](const std::string& v) {
    o.max_bytes_per_file = positive_bytes(v, "-max-bytes-per-file");
  });
  // Not nsqd's: the disk queues' bound (nsqd's is its disk's).
  flags.take("max-disk-bytes", Kind::value, [&o](const std::string& v) {
    o.max_disk_bytes = positive_bytes(v, "-max-disk-bytes");
  });
  const std::string disk = "the disk queues go with the process: nothing is synced";
  for (const char* flag : {"sync-every", "sync-timeout"}) flags.refuse(flag, Kind::value, disk);
  const std::string scans = "timeouts and deferrals fire when due, not at nsqd's queue scans";
  for (const char* flag : {"queue-scan-selection-count", "queue-scan-worker-pool-max"}) {
    flags.refuse(flag, Kind::value, scans);
  }
  const std::string statsd = "no statsd client";
  for (const char* flag :
       {"statsd-address", "statsd-interval", "statsd-prefix", "statsd-udp-packet-size"}) {
    flags.refuse(flag, Kind::value, statsd);
  }
  flags.refuse("statsd-mem-stats", Kind::boolean, statsd);
  flags.refuse("statsd-exclude-ephemeral", Kind::boolean, statsd);
  const std::string e2e = "end-to-end latency percentiles are not tracked";
  flags.refuse("e2e-processing-latency-percentile", Kind::repeated, e2e,
               "e2e_processing_latency_percentiles");
  flags.refuse("e2e-processing-latency-window-time", Kind::value, e2e);
  flags.refuse("node-id", Kind::value, "message ids come from a counter", "id");
  flags.refuse("worker-id", Kind::boolean, "message ids come from a counter");
  flags.refuse("max-channel-consumers", Kind::value, "a channel takes any number of consumers");
  flags.refuse("min-output-buffer-timeout", Kind::value,
               "output is written at once; output buffer values are only reported");
  flags.refuse("http-client-connect-timeout", Kind::value, "this nsqd makes no HTTP requests");
  flags.refuse("http-client-request-timeout", Kind::value, "this nsqd makes no HTTP requests");
}

void declare_logging_flags(GoFlags& flags) {
  flags.take("log-level", Kind::value, [](const std::string& v) {
    if (v != "debug" && v != "info" && v != "warn" && v != "error" && v != "fatal") {
      throw UsageError("want debug, info, warn, error or fatal");
    }
  });
  flags.accept("log-prefix", Kind::value);
  flags.accept("verbose", Kind::boolean);
}

// Not the real servers' flags: the journal, fault rules, admin API and manual clock of
// docs/testing.md, the same on nsqd and nsqlookupd.
struct TestingFlags {
  std::string journal_file;
  std::optional<std::pair<std::string, std::uint16_t>> admin;  // host, port
  std::vector<testing::FaultRule> faults;
  bool manual_clock = false;

  void declare(GoFlags& flags) {
    // The journal of what the connections sent and were sent, as JSON lines.
    flags.take("journal", Kind::value, [this](const std::string& v) { journal_file = v; });
    // The admin API (journal, fault rules, clock) on a port of its own.
    flags.take("admin-address", Kind::value,
               [this](const std::string& v) { admin = parse_listen_address(v, "-admin-address"); });
    // Fault rules (polybus/fault_rules.hpp), "unit=FIN,nth=3,error=E_FIN_FAILED ...".
    flags.take("fault", Kind::repeated, [this](const std::string& v) {
      if (v.empty()) return faults.clear();
      try {
        faults.push_back(testing::parse_fault_rule(v));
      } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
      }
    });
    // The server's timers on a clock that moves only through POST /clock/advance?ms=N.
    flags.take("manual-clock", Kind::boolean,
               [this](const std::string& v) { manual_clock = parse_go_bool(v, "-manual-clock"); });
  }

  std::shared_ptr<polybus::ManualClock> clock() const {
    if (!manual_clock) return nullptr;
    if (!admin) throw UsageError("-manual-clock needs -admin-address: the clock moves through it");
    return std::make_shared<polybus::ManualClock>();
  }
};

}  // namespace

int run_nsqlookupd(const Argv& argv) {
  nsq::testing::LookupdOptions options;
  // nsqlookupd 1.3's defaults: every interface, the well-known ports.
  options.tcp_host = "0.0.0.0";
  options.tcp_port = 4160;
  options.http_host = "0.0.0.0";
  options.http_port = 4161;
  options.broadcast_address = host_name();
  bool version = false;
  GoFlags flags;
  flags.take("version", Kind::boolean,
             [&](const std::string& v) { version = parse_go_bool(v, "-version"); });
  flags.take("config", Kind::value, [](const std::string&) {});
  flags.take("tcp-address", Kind::value, [&options](const std::string& v) {
    std::uint16_t port = 0;
    std::tie(options.tcp_host, port) = parse_listen_address(v, "-tcp-address");
    options.tcp_port = port;
  });
  flags.take("http-address", Kind::value, [&options](const std::string& v) {
    std::tie(options.http_host, options.http_port) = parse_listen_address(v, "-http-address");
  });
  flags.take("broadcast-address", Kind::value,
             [&options](const std::string& v) { options.broadcast_address = v; });
  flags.take("inactive-producer-timeout", Kind::duration, [&options](const std::string& v) {
    options.inactive_producer_timeout = as_ms(v, "-inactive-producer-timeout");
  });
  flags.take("tombstone-lifetime", Kind::duration, [&options](const std::string& v) {
    options.tombstone_lifetime = as_ms(v, "-tombstone-lifetime");
  });
  declare_logging_flags(flags);
  TestingFlags testing_flags;
  testing_flags.declare(flags);
  if (flags.parse(argv, "config")) {
    std::cout << "usage: polybus broker nsqlookupd [nsqlookupd 1.3 flags]\n"
                 "Runs the in-process nsqlookupd with nsqlookupd's own command line: its TCP "
                 "protocol on -tcp-address (0.0.0.0:4160), its HTTP API on -http-address "
                 "(0.0.0.0:4161).\n"
              << flags.describe();
    return 0;
  }
  if (version) {
    std::cout << "nsqlookupd v1.3.0 (polybus in-process nsqlookupd)\n";
    return 0;
  }
  options.clock = testing_flags.clock();
  options.faults = testing_flags.faults;
  // A journal written or served records, whatever it keeps.
  if (!testing_flags.journal_file.empty() || testing_flags.admin) options.journal_capacity = 100000;
  block_termination_signals();
  std::unique_ptr<nsq::testing::Lookupd> lookupd;
  try {
    lookupd = nsq::testing::Lookupd::start(options);
  } catch (const std::exception& e) {
    throw std::runtime_error("cannot start nsqlookupd on " + options.tcp_host + ":" +
                             std::to_string(*options.tcp_port) + " (HTTP " + options.http_host +
                             ":" + std::to_string(options.http_port) + "): " + e.what());
  }
  std::cerr << "[nsqlookupd] TCP: listening on " << options.tcp_host << ":" << lookupd->tcp_port()
            << "\n"
            << "[nsqlookupd] HTTP: listening on " << options.http_host << ":"
            << lookupd->http_port() << std::endl;
  if (!testing_flags.journal_file.empty()) lookupd->journal().write_to(testing_flags.journal_file);
  std::unique_ptr<testing::BrokerAdmin> admin;  // destroyed before the nsqlookupd
  if (testing_flags.admin) {
    admin = std::make_unique<testing::BrokerAdmin>(testing_flags.admin->first,
                                                   testing_flags.admin->second, lookupd->journal(),
                                                   lookupd->faults(), options.clock);
    std::cerr << "[nsqlookupd] admin (journal, faults, clock): listening on " << admin->address()
              << std::endl;
  }
  wait_for_termination_signal();
  return 0;
}

int run_nsqd(const Argv& argv) {
  NsqdOptions options;
  // nsqd 1.3's defaults where they differ from the in-process ones: every interface, the
  // well-known ports, the HTTP API, the host name as broadcast address.
  options.tcp_host = "0.0.0.0";
  options.tcp_port = 4150;
  options.http_host = "0.0.0.0";
  options.http_port = 4151;
  options.broadcast_address = host_name();
  options.heartbeat_interval = std::chrono::seconds(30);
  options.log = [](const std::string& line) { std::cerr << "[nsqd] " << line << std::endl; };
  bool version = false;
  GoFlags flags;
  declare_nsqd_flags(flags, options, version);
  TestingFlags testing_flags;
  testing_flags.declare(flags);
  if (flags.parse(argv, "config")) {
    std::cout << "usage: polybus broker nsqd [nsqd 1.3 flags]\n"
                 "Runs the in-process nsqd with nsqd's own command line: its TCP protocol on "
                 "-tcp-address (0.0.0.0:4150), its HTTP API on -http-address (0.0.0.0:4151). "
                 "docs/testing.md says what differs from nsqd.\n"
              << flags.describe();
    return 0;
  }
  if (version) {
    std::cout << "nsqd v1.3.0 (polybus in-process nsqd)\n";
    return 0;
  }
  options.journal_file = testing_flags.journal_file;
  if (testing_flags.admin) std::tie(options.admin_host, options.admin_port) = *testing_flags.admin;
  options.faults = testing_flags.faults;
  options.clock = testing_flags.clock();
  block_termination_signals();
  std::unique_ptr<nsq::testing::Nsqd> nsqd;
  try {
    nsqd = nsq::testing::Nsqd::start(options);
  } catch (const std::exception& e) {
    throw std::runtime_error("cannot start nsqd on " + options.tcp_host + ":" +
                             std::to_string(options.tcp_port) + " (HTTP " + options.http_host +
                             ":" + std::to_string(*options.http_port) + "): " + e.what());
  }
  // As nsqd logs them, on standard error; standard output stays free for scripts.
  std::cerr << "[nsqd] TCP: listening on " << options.tcp_host << ":" << nsqd->tcp_port() << "\n"
            << "[nsqd] HTTP: listening on " << options.http_host << ":" << nsqd->http_port()
            << std::endl;
  if (options.admin_port) {
    std::cerr << "[nsqd] admin (journal, faults, clock): listening on " << options.admin_host << ":"
              << nsqd->admin_port() << std::endl;
  }
  if (!options.data_path.empty()) {
    std::cerr << "[nsqd] -data-path " << options.data_path
              << ": disk queues go in a folder of their own there, removed on exit" << std::endl;
  }
  wait_for_termination_signal();
  return 0;
}

}  // namespace polybus::cli

namespace polybus::cli {

int run_lookupd_fan_out(std::uint32_t nsqd_count, const std::string& topic, std::uint16_t port) {
  auto lookupd = nsq::testing::Lookupd::start(port);
  std::vector<std::unique_ptr<nsq::testing::Nsqd>> nsqds;
  nsqds.reserve(nsqd_count);
  for (std::uint32_t i = 0; i < nsqd_count; ++i) {
    nsqds.push_back(nsq::testing::Nsqd::start());
    nsqds.back()->register_with(*lookupd);
    // A topic exists on an nsqd once something is published to it: one message each, so that
    // the lookupd names every nsqd for it.
    if (!topic.empty()) {
      Client client = polybus::connect("nsq://" + nsqds.back()->tcp_address());
      if (auto status = client.publish_sync(topic, "fan-out"))
        throw std::runtime_error("creating " + topic + " on " + nsqds.back()->tcp_address() + ": " +
                                 status.message());
      client.close_sync(std::chrono::seconds(5));
    }
  }
  std::cout << "nsq+lookupd://" << lookupd->http_address() << std::endl;
  wait_for_termination_signal();
  return 0;
}

}  // namespace polybus::cli
