// The Figg adapter: figg://host:port. Options: `polybus schemes`.
#pragma once

namespace polybus::figg {

// Registers the figg scheme (idempotent).
void register_scheme();

}  // namespace polybus::figg
