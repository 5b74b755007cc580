// SPDX-License-Identifier: Apache-2.0
// The quickio schemes' option table: the core's, with QuickIO's reconnect policy as defaults,
// plus QuickIO's own. One table for the URL query, ClientOptions and the documentation.
#pragma once

#include "polybus/options.hpp"

namespace polybus::quickio::detail {

OptionTable option_table();

}  // namespace polybus::quickio::detail
