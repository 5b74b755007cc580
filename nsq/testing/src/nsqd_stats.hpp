// SPDX-License-Identifier: Apache-2.0
// GET /stats of the test nsqd: nsqd 1.3's JSON document (format=json) and its text page, field
// for field, from the broker and the connections. Runs on the server's io thread.
#pragma once

#include <string>

namespace polybus::nsq::testing::detail {

class NsqdServer;

struct StatsQuery {
  std::string topic;    // "": every topic
  std::string channel;  // "": every channel
  bool include_clients = true;
  bool include_mem = true;
};

std::string stats_json(NsqdServer& server, const StatsQuery& query);
std::string stats_text(NsqdServer& server, const StatsQuery& query);

}  // namespace polybus::nsq::testing::detail
