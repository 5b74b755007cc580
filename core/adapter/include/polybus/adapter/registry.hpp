// SPDX-License-Identifier: Apache-2.0
// Schemes register here (the adapter side of polybus/schemes.hpp). The core knows none of the
// adapters: each adapter library exposes a register function, and polybus/all.hpp calls them all.
#pragma once

#include "polybus/export.hpp"

#include <functional>
#include <memory>
#include <string>

#include "polybus/adapter/adapter.hpp"
#include "polybus/schemes.hpp"

namespace polybus {

struct POLYBUS_API SchemeInfo : SchemeDescription {
  std::function<std::unique_ptr<Adapter>(AdapterContext&)> factory;
};

// Replaces an earlier registration of the same scheme.
POLYBUS_API void register_scheme(SchemeInfo info);
// Null when none is registered. What it returns stays valid (and unchanged) while held, even if
// the scheme is registered again meanwhile.
POLYBUS_API std::shared_ptr<const SchemeInfo> find_scheme(const std::string& scheme);

// The options every scheme has; adapters start from this table and add their own.
POLYBUS_API OptionTable core_option_table();

}  // namespace polybus
