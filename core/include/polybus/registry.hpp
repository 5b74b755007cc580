// Schemes register here. The core knows none of the adapters: each adapter library exposes a
// register function (see polybus/polybus.hpp for all of them at once).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "polybus/adapter.hpp"

namespace polybus {

struct SchemeInfo {
  std::string scheme;
  std::string summary;
  OptionTable options;  // the core's options plus the adapter's
  Capabilities capabilities;
  std::function<std::unique_ptr<Adapter>(AdapterContext&)> factory;
};

// Replaces an earlier registration of the same scheme.
void register_scheme(SchemeInfo info);
const SchemeInfo* find_scheme(const std::string& scheme);
std::vector<std::string> registered_schemes();

// The options every scheme has; adapters start from this table and add their own.
OptionTable core_option_table();

}  // namespace polybus
