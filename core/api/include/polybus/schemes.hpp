// The schemes this program can connect to, and what each offers: for listing them (`polybus
// schemes`) and for checking a capability or an option before connecting. Adapters register
// themselves (polybus/all.hpp's register_all_schemes(), or each adapter's register_scheme()).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "polybus/capabilities.hpp"
#include "polybus/options.hpp"

namespace polybus {

struct SchemeDescription {
  std::string scheme;
  std::string summary;
  OptionTable options;  // the core's options plus the adapter's, with their defaults
  Capabilities capabilities;
};

// Every registered scheme, sorted.
std::vector<std::string> registered_schemes();
// nullopt when no adapter registered `scheme`.
std::optional<SchemeDescription> describe_scheme(const std::string& scheme);

}  // namespace polybus
