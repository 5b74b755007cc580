// SPDX-License-Identifier: Apache-2.0
// The schemes this program can connect to, and what each offers: for listing them (`polybus
// schemes`) and for checking a capability or an option before connecting. Adapters register
// themselves (polybus/all.hpp's register_all_schemes(), or each adapter's register_scheme()).
#pragma once

#include "polybus/export.hpp"

#include <optional>
#include <string>
#include <vector>

#include "polybus/capabilities.hpp"
#include "polybus/options.hpp"

namespace polybus {

/// A registered scheme and what it offers (describe_scheme()).
struct POLYBUS_API SchemeDescription {
  std::string scheme;   ///< as in URLs, e.g. "nsq+lookupd"
  std::string summary;  ///< what it connects to, in a line
  OptionTable options;  ///< the core's options plus the adapter's, with their defaults
  /// What its adapter can do whatever the options; a client's capabilities() may say more
  /// (request/reply over topics with envelope=cloudevents).
  Capabilities capabilities;
};

/// Every registered scheme, sorted.
POLYBUS_API std::vector<std::string> registered_schemes();
/// The scheme's description; nullopt when no adapter registered `scheme`.
POLYBUS_API std::optional<SchemeDescription> describe_scheme(const std::string& scheme);

}  // namespace polybus
