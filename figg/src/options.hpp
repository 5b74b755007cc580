// SPDX-License-Identifier: Apache-2.0
// The figg scheme's option table: the core's, with the Figg Go SDK's reconnect policy as
// defaults, plus Figg's own (the publish window, the PING period). The connection reads it.
#pragma once

#include "polybus/adapter/registry.hpp"

namespace polybus::figg {

OptionTable option_table();

}  // namespace polybus::figg
