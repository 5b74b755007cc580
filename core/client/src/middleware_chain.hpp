// SPDX-License-Identifier: Apache-2.0
// Internal: SubscribeOptions::middleware around a subscription's handler, composed once when it
// subscribes, so a message pays one call per middleware and nothing for an empty chain.
#pragma once

#include <vector>

#include "polybus/subscription.hpp"

namespace polybus::detail {

// handler inside `chain`, outermost first. An empty middleware throws
// polybus::Error(errc::invalid_argument).
MessageHandler wrap_handler(const std::vector<Middleware>& chain, MessageHandler handler);
// The same for serve(): the innermost step runs the serve handler and sends its reply; a chain
// that answers the request itself (or never calls `next`) leaves the reply to it, and one that
// neither answers nor passes it on has the requester told so.
ServeHandler wrap_serve_handler(const std::vector<Middleware>& chain, ServeHandler handler);

}  // namespace polybus::detail
