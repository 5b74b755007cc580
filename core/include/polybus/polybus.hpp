// The whole public API. Link polybus::polybus and call register_all_schemes() once to have every
// adapter this build includes (mem:// is always there).
#pragma once

#include "polybus/client.hpp"
#include "polybus/error.hpp"
#include "polybus/mem.hpp"
#include "polybus/registry.hpp"
#include "polybus/url.hpp"
#include "polybus/register_all.hpp"
