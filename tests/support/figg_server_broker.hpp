// SPDX-License-Identifier: Apache-2.0
// The real Figg server for the contract suite, opt-in: POLYBUS_FIGG_SERVER names a server
// binary built by hand (nothing in this repository builds it); POLYBUS_FIGG_SERVER_NO_PING=1
// for the older server, which never answers PING. Registered as "figg-real".
#pragma once

namespace polybus::test {
bool register_real_figg_broker();
}
