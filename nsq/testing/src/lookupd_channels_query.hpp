// SPDX-License-Identifier: Apache-2.0
// What nsqd asks each nsqlookupd when it creates a topic: GET /channels?topic=T, so that the
// channels other nsqd have for it exist here before the first message is published (nsqd 1.3's
// GetTopic). One request on a connection of its own, bounded in time (nsqd's default
// --http-client-request-timeout, 5 s) and size; a failure answers no channels. Runs on the
// nsqd's io thread.
#pragma once

#include <asio/io_context.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace polybus::nsq::testing::detail {

class LookupdChannelsQuery {
 public:
  virtual ~LookupdChannelsQuery() = default;
  // Ends the query at once: `done` gets no channels (the nsqd stops).
  virtual void cancel() = 0;
};

// `done` gets the channel names (none when the request failed or was cancelled), once.
std::shared_ptr<LookupdChannelsQuery> query_lookupd_channels(
    asio::io_context& io, const std::string& http_address, const std::string& topic,
    std::function<void(std::vector<std::string>)> done);

}  // namespace polybus::nsq::testing::detail
