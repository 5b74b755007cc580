// SPDX-License-Identifier: Apache-2.0
// The test nsqd's own admin HTTP API, on a port of its own (never nsqd's ports or paths, so the
// drop-in stays faithful), for tests in any language:
//   GET    /journal?since=SEQ   the journal's entries after SEQ, as JSON lines
//   GET    /faults/ID           {"id":ID,"fired":N}
//   POST   /faults              a rule in its text form (parse_fault_rule) -> {"id":ID}
//   DELETE /faults/ID           removes one; DELETE /faults removes all
#pragma once

#include "http_server.hpp"
#include "polybus/fault_rules.hpp"
#include "polybus/journal.hpp"

namespace polybus::nsq::testing::detail {

HttpServer::Handlers admin_handlers(polybus::testing::Journal& journal,
                                    polybus::testing::FaultRules& faults);

}  // namespace polybus::nsq::testing::detail
