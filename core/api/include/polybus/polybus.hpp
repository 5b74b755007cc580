// SPDX-License-Identifier: Apache-2.0
// The application API: clients, messages, subscriptions, options, errors, events, URLs and the
// registered schemes. No asio, no adapter interface (that is polybus/adapter/...). To have every
// adapter of this build (mem:// included), include polybus/all.hpp instead and call
// register_all_schemes() once; or link one adapter and call its register_scheme().
#pragma once

#include "polybus/client.hpp"
#include "polybus/error.hpp"
#include "polybus/middleware.hpp"
#include "polybus/schemes.hpp"
#include "polybus/status.hpp"
#include "polybus/url.hpp"
#include "polybus/version.hpp"
