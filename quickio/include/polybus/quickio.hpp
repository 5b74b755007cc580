// SPDX-License-Identifier: Apache-2.0
// The QuickIO adapter: quickio://host:port (raw TCP), quickio+ws://host:port[/path] (WebSocket,
// falling back to HTTP long polling) and quickio+http://host:port. Options: `polybus schemes`
// and docs/quickio.md. The native client is polybus/quickio/client.hpp.
#pragma once

#include "polybus/export.hpp"

/// The QuickIO adapter (quickio://, quickio+ws:// and quickio+http://).
namespace polybus::quickio {

/// Registers the quickio, quickio+ws and quickio+http schemes (idempotent).
POLYBUS_API void register_scheme();

}  // namespace polybus::quickio
