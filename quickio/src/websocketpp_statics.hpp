// SPDX-License-Identifier: Apache-2.0
// websocketpp 0.8.2 decides its byte order lazily in a function-local static that is not
// synchronised (lib::net::_htonll), so two threads framing their first large WebSocket message at
// once race on it. Deciding it during static initialisation, before any thread exists, removes the
// race. Include this in every file that frames WebSocket messages.
#pragma once

#include <websocketpp/common/network.hpp>

namespace polybus::quickio::detail {

// Internal linkage: every including file initialises it, so no linker can drop it.
[[maybe_unused]] static const bool websocketpp_byte_order_decided =
    (websocketpp::lib::net::_htonll(1) != 0);

}  // namespace polybus::quickio::detail
