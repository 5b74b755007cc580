// SPDX-License-Identifier: Apache-2.0
// The MemoDB adapter: memodb+tcp://host:port (IPv4, a name, or [IPv6]) and
// memodb+ipc:///path, speaking memo01 to a MemoDB broker over NNG req0. Request/reply only:
// request() sends a JOB and completes with the RESULT payload; serve() runs workers (READY,
// JOB -> RESULT, HEARTBEAT). Options: `polybus schemes`.
#pragma once

#include "polybus/export.hpp"

/// The MemoDB adapter (memodb+tcp:// and memodb+ipc://).
namespace polybus::memodb {

/// Registers the memodb+tcp and memodb+ipc schemes (idempotent).
POLYBUS_API void register_scheme();

}  // namespace polybus::memodb
