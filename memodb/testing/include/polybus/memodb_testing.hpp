// SPDX-License-Identifier: Apache-2.0
// An in-process MemoDB broker (memo01) for tests: rep0 over Asio (it speaks NNG's SP protocol
// itself, so libnng's defects cannot stall the NNG sockets of clients in its process), routing jobs
// by service name to registered workers, queueing jobs no worker takes, and the real broker's rules
// (docs/memodb.md): worker IDs of 4 bytes from a new range after each start, HEARTBEAT to a worker
// idle for heartbeat_interval, a worker that does not answer within heartbeat_timeout or return its
// RESULT within the job's timeout is forgotten, a job no worker takes within queue_timeout is
// dropped, DISCONNECT to IDs it does not know, RESULT handed to the client as ["memo01", 3, h''] +
// payload, and every drop silent (no reply at all). Unlike the real broker it survives malformed
// messages (empty, 0xff, truncated, anything): each is counted and dropped.
//
//   BrokerOptions options;
//   options.heartbeat_interval = 200ms;            // the real broker's 10 s timings, made fast
//   auto broker = polybus::memodb::testing::Broker::launch(options);
//   auto client = polybus::connect("memodb+" + broker->url() + "?heartbeat_interval=200ms");
#pragma once

#include "polybus/export.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "polybus/fault_rules.hpp"
#include "polybus/journal.hpp"
#include "polybus/manual_clock.hpp"
#include "polybus/metrics.hpp"

/// An in-process MemoDB broker for tests, and its test brokers.
namespace polybus::memodb::testing {

/// How a test MemoDB broker listens, and its timings (the real broker's by default).
struct POLYBUS_API BrokerOptions {
  /// The address to listen on, as NNG writes it: tcp://IP:port (empty: 127.0.0.1 on a free port)
  /// or ipc:///path.
  std::string url;
  /// A worker waiting this long without a job gets a HEARTBEAT.
  std::chrono::milliseconds heartbeat_interval{10'000};
  /// A worker that has not answered its HEARTBEAT within this is forgotten.
  std::chrono::milliseconds heartbeat_timeout{10'000};
  /// A JOB that no worker takes within this is dropped, without a reply.
  std::chrono::milliseconds queue_timeout{10'000};
  /// What one connection may make the broker hold: its requests waiting for an answer (a queued
  /// JOB, a waiting worker's READY), their bytes and the bytes of answers not yet written to it.
  /// At either bound the broker stops reading that connection until half of it is gone (its
  /// writes then wait in TCP), so a client that floods requests or never reads its answers cannot
  /// grow the broker's memory. The real broker has no such bound.
  std::size_t max_held_requests = 65'536;
  std::size_t max_held_bytes = std::size_t{64} << 20;  ///< the bytes bound of max_held_requests

  /// Entries the journal keeps (Broker::journal()): each message a connection sends (READY, JOB,
  /// RESULT, HEARTBEAT, DISCONNECT) and each it is sent (JOB, RESULT, HEARTBEAT, DISCONNECT),
  /// with the worker ID in hex (`id`), the service as `topic` (a READY's services and a worker's
  /// HEARTBEAT's comma-separated, a RESULT's its job's), a JOB's timeout in ms (`count`) and the
  /// payload's bytes. 0 keeps none and costs nothing.
  std::size_t journal_capacity = 0;
  /// Fault rules in force from the start (Broker::faults() changes them later). A rule's unit is
  /// a message type a client or worker sends: READY, JOB, RESULT, HEARTBEAT or DISCONNECT (what
  /// the broker sends follows from those). memo01 has no error message: `error` answers
  /// DISCONNECT, its one refusal (the rule's text is only in the journal), and lets go of the
  /// worker the message names; to a client's JOB the DISCONNECT is an unexpected reply, and the
  /// job is not run. `swallow` drops the request without a reply, as the real broker drops what
  /// it cannot serve (a client's req0 sends it again after its resend time). `delay` holds what
  /// the connection is sent. `close` and `reset` end the connection (reset with a TCP RST; over
  /// ipc:// as a close) and drop the request. `duplicate` queues a JOB twice, so that it is run
  /// twice and its requester gets the first RESULT; a RESULT is written to its requester twice;
  /// the answer to a READY, HEARTBEAT or DISCONNECT is written twice (req0 keeps the first).
  std::vector<polybus::testing::FaultRule> faults;
  /// Time the test controls (polybus/manual_clock.hpp): a job's timeout at its worker and
  /// queue_timeout come due only as the test advances it. Heartbeats stay on the real clock.
  /// Null: the real clock.
  std::shared_ptr<polybus::ManualClock> clock;
};

/// What a test MemoDB broker did since it was launched, and its state now (Broker::stats()).
struct POLYBUS_API BrokerStats {
  std::uint64_t received = 0;            ///< requests received
  std::uint64_t malformed = 0;           ///< undecodable requests (dropped; counted in dropped too)
  std::uint64_t dropped = 0;             ///< requests left without a reply (stop()'s losses aside)
  std::uint64_t registrations = 0;       ///< READYs accepted
  std::uint64_t jobs = 0;                ///< JOBs from clients
  std::uint64_t dispatched = 0;          ///< JOBs handed to a worker
  std::uint64_t results = 0;             ///< RESULTs handed to a client
  std::uint64_t heartbeats = 0;          ///< HEARTBEATs sent
  std::uint64_t disconnects = 0;         ///< DISCONNECTs sent
  std::uint64_t queue_expired = 0;       ///< jobs dropped after queue_timeout
  std::uint64_t workers_expired = 0;     ///< workers forgotten (job or heartbeat timeout)
  std::uint64_t starts = 0;              ///< launch and every start() after a stop()
  std::uint64_t read_stalls = 0;         ///< times a connection was at max_held_* and not read
  std::uint64_t held_requests_peak = 0;  ///< the most requests one connection had held at once
  std::uint64_t held_bytes_peak = 0;     ///< the most bytes one connection had held at once
  // Now:
  std::uint64_t connections = 0;  ///< SP connections open now (one per client socket)
  std::uint64_t workers = 0;      ///< workers registered now
  std::uint64_t idle = 0;         ///< workers waiting for a job now
  std::uint64_t queued = 0;       ///< jobs waiting for a worker now
  std::map<std::string, std::uint64_t> workers_by_service;  ///< workers registered now, per service
};

class BrokerImpl;

/// A MemoDB broker (memo01) on an io thread of its own. Every method may be called from any
/// thread.
class POLYBUS_API Broker {
 public:
  /// Listens at once. Throws std::runtime_error when it cannot listen on options.url.
  static std::unique_ptr<Broker> launch(BrokerOptions options = {});
  /// Closes the socket and every connection.
  ~Broker();

  /// The NNG address clients dial: options.url with the port it listens on (tcp://127.0.0.1:port
  /// by default), or the ipc:// address it was given.
  std::string url() const;
  /// stop() closes the socket: every connection drops and every worker and queued job is lost,
  /// as when the real broker dies. start() listens again on the same address.
  void stop();
  /// Listens again after stop(), on the same address. Throws std::runtime_error when it cannot.
  void start();
  /// The statistics now.
  BrokerStats stats() const;
  /// Connections, bytes, and per service the jobs taken, dispatched and answered, the jobs queued
  /// and the workers, in the terms every test broker uses (docs/metrics.md).
  metrics::BrokerMetrics metrics() const;
  /// Waits until the condition holds on the statistics (re-checked after every event), up to
  /// the bound; false if it never did. `condition` runs with the statistics locked: it must not
  /// call this broker.
  bool wait_until(const std::function<bool(const BrokerStats&)>& condition,
                  std::chrono::milliseconds bound) const;
  /// What the connections sent and were sent (BrokerOptions::journal_capacity).
  polybus::testing::Journal& journal() const;
  /// The fault rules in force (BrokerOptions::faults).
  polybus::testing::FaultRules& faults() const;

  /// Made by launch(); the implementation is internal.
  explicit Broker(std::unique_ptr<BrokerImpl> impl);

 private:
  std::unique_ptr<BrokerImpl> impl_;
};

/// Registers "memodb+tcp" and "memodb+ipc" (a fresh temporary path) with polybus::testing (the
/// contract suite and the demo); their URLs carry fast broker timings and matching options.
POLYBUS_API void register_test_brokers();

}  // namespace polybus::memodb::testing
