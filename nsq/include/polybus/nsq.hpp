// SPDX-License-Identifier: Apache-2.0
// The NSQ adapter: nsq://host:port[,host:port...] connects to nsqd directly; nsq+lookupd://
// host:port[,...] discovers nsqd through nsqlookupd's HTTP API. Options: `polybus schemes`.
#pragma once

#include "polybus/export.hpp"

/// The NSQ adapter (nsq:// and nsq+lookupd://).
namespace polybus::nsq {

/// Registers the nsq and nsq+lookupd schemes (idempotent).
POLYBUS_API void register_scheme();

}  // namespace polybus::nsq
