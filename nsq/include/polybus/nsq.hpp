// The NSQ adapter: nsq://host:port[,host:port...] connects to nsqd directly; nsq+lookupd://
// host:port[,...] discovers nsqd through nsqlookupd's HTTP API. Options: `polybus schemes`.
#pragma once

namespace polybus::nsq {

// Registers the nsq and nsq+lookupd schemes (idempotent).
void register_scheme();

}  // namespace polybus::nsq
