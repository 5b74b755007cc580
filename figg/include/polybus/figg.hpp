// SPDX-License-Identifier: Apache-2.0
// The Figg adapter: figg://host:port. Options: `polybus schemes`.
#pragma once

#include "polybus/export.hpp"

/// The Figg adapter (figg://).
namespace polybus::figg {

/// Registers the figg scheme (idempotent).
POLYBUS_API void register_scheme();

}  // namespace polybus::figg
