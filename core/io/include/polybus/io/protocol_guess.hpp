// SPDX-License-Identifier: Apache-2.0
// Which protocol a peer's first bytes look like, so that a client pointed at the wrong port or
// the wrong scheme hears "this looks like HTTP" rather than only what failed to parse.
#pragma once

#include "polybus/export.hpp"

#include <string>
#include <string_view>

namespace polybus {

// "HTTP", "TLS", "NSQ", "Figg", "QuickIO", "NNG", "SSH", or empty when the bytes look like none
// of them. Needs the first 8 to 16 bytes a server sent.
POLYBUS_API std::string guess_protocol(std::string_view first_bytes);

// A sentence to append to a connection's error when its first bytes look like another protocol
// than `expected` (one of the names above): " (the server's first bytes look like NSQ, not Figg:
// wrong port or scheme?)". Empty when they look like `expected` or like nothing known.
POLYBUS_API std::string protocol_mismatch_hint(std::string_view first_bytes,
                                               std::string_view expected);

}  // namespace polybus
