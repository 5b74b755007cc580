// SPDX-License-Identifier: Apache-2.0
// Where a client's warnings go when the application gave it no log sink: standard error, as
// go-nsq and librdkafka do, one line each, with a storm of one kind cut down to a line a second.
#pragma once

#include <string>

#include "polybus/events.hpp"

namespace polybus::detail {

// A sink that writes "polybus[<client>] <level>: <text>" lines to stderr. Lines of one kind (the
// text with its digits and quoted parts left out, so that message ids and offsets do not make a
// kind of their own) pass five at once, then one a second; the next one that passes says how
// many were held back. Thread-safe.
LogSink stderr_log(std::string client_name);

}  // namespace polybus::detail
