// Internal: the mem:// scheme, registered by the core itself.
#pragma once

#include "polybus/adapter/registry.hpp"

namespace polybus::mem {
SchemeInfo scheme_info();
}
