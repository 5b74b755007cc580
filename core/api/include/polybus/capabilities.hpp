// SPDX-License-Identifier: Apache-2.0
// What an adapter can do. Calling what an adapter cannot do is an error (errc::not_supported),
// never a silent no-op; the contract suite uses these flags to decide which behaviours to check.
#pragma once

#include "polybus/export.hpp"

#include <string>
#include <utility>
#include <vector>

namespace polybus {

/// What a scheme's adapter can do (Client::capabilities(), SchemeDescription::capabilities).
/// Calling what it cannot do fails with errc::not_supported. Every flag defaults to false, not
/// claimed: an adapter claims each thing it does, so one that forgets a flag claims too little,
/// never a guarantee it does not give.
struct POLYBUS_API Capabilities {
  bool ack = false;                    ///< messages must be acknowledged; unacked ones come back
  bool nack_with_delay = false;        ///< a message can be requeued with a delay
  bool touch = false;                  ///< a slow handler can extend its message's timeout
  bool redelivery_on_timeout = false;  ///< a message never acked is redelivered after its timeout
  bool replay_from_offset = false;     ///< subscribe can start from an offset
  bool request_reply = false;          ///< request() and serve()
  /// A serve handler's failure reaches the requester as an error (false: the protocol has no
  /// error reply, so the request runs to its deadline).
  bool reply_errors = false;
  bool ordered_delivery = false;  ///< one subscriber sees one publisher's messages in order
  bool consumer_groups = false;   ///< groups share messages; each group gets every message
  /// publish_batch() works, as one protocol operation (false: it fails with not_supported).
  bool batch_publish = false;
  bool deferred_publish = false;  ///< publish with a delay (PublishOptions::defer)
  bool publish = false;           ///< plain publish (false: request/reply only)
  bool subscribe = false;         ///< plain subscribe
  bool durable = false;           ///< the broker keeps messages across its own restart
  /// A publish completes when the broker has accepted it (false: once it was written, as the
  /// protocol confirms nothing).
  bool publish_confirmed = false;
  /// Reconnects follow reconnect_backoff or ConnectOptions::reconnect_backoff (false: the
  /// transport paces them itself; only the policy it follows, the scheme's default
  /// reconnect_backoff, is accepted, and any other fails the connect with not_supported).
  bool reconnect_policy = false;

  /// Every capability as a (name, value) pair, in a fixed order, for listing them.
  std::vector<std::pair<const char*, bool>> list() const {
    return {{"publish", publish},
            {"subscribe", subscribe},
            {"ack", ack},
            {"nack_with_delay", nack_with_delay},
            {"touch", touch},
            {"redelivery_on_timeout", redelivery_on_timeout},
            {"replay_from_offset", replay_from_offset},
            {"request_reply", request_reply},
            {"reply_errors", reply_errors},
            {"ordered_delivery", ordered_delivery},
            {"consumer_groups", consumer_groups},
            {"batch_publish", batch_publish},
            {"deferred_publish", deferred_publish},
            {"durable", durable},
            {"publish_confirmed", publish_confirmed},
            {"reconnect_policy", reconnect_policy}};
  }
};

}  // namespace polybus
