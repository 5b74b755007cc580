// SPDX-License-Identifier: Apache-2.0
// A test broker's admin endpoint, for tests in any language: the broker's journal, fault rules
// and clock over HTTP/1.1, on a port of its own (never one of the broker's, so a drop-in server
// stays faithful to the real one), served by a thread of its own.
//   GET    /journal?since=SEQ   the journal's entries after SEQ (default 0), as JSON lines
//   POST   /faults              a rule in its text form (parse_fault_rule) -> {"id":ID}
//   GET    /faults/ID           {"id":ID,"fired":N}
//   DELETE /faults/ID           removes one; DELETE /faults removes all
//   GET    /clock               {"manual":BOOL,"now_ns":N}: the clock the broker's timers use
//   POST   /clock/advance?ms=N  advances a manual clock by N ms, running what comes due, then
//                               answers as GET /clock (409 for a broker on the real clock)
// Errors are {"message":"..."} with 400, 404, 405 (with Allow), 409, 413 or 431.
#pragma once

#include "polybus/export.hpp"

#include <cstdint>
#include <memory>
#include <string>

#include "polybus/fault_rules.hpp"
#include "polybus/journal.hpp"
#include "polybus/manual_clock.hpp"

namespace polybus::testing {

/// The endpoint; it serves until destroyed.
class POLYBUS_API BrokerAdmin {
 public:
  /// Listens at once on `host` (an IP address) and `port` (0: a free one); throws
  /// std::system_error naming the address when it cannot. `journal` and `faults` must outlive
  /// the endpoint; `clock` may be null (the broker's timers are on the real clock).
  BrokerAdmin(const std::string& host, std::uint16_t port, Journal& journal, FaultRules& faults,
              std::shared_ptr<ManualClock> clock = nullptr);
  ~BrokerAdmin();  ///< stops serving: closes the listener and every connection
  BrokerAdmin(const BrokerAdmin&) = delete;
  BrokerAdmin& operator=(const BrokerAdmin&) = delete;

  /// The port it listens on.
  std::uint16_t port() const;
  /// "host:port".
  std::string address() const;

 private:
  struct Server;
  std::unique_ptr<Server> server_;
};

}  // namespace polybus::testing
