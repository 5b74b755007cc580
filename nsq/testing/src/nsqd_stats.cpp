// SPDX-License-Identifier: Apache-2.0
#include "nsqd_stats.hpp"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <vector>

#include "go_text.hpp"
#include "nsqd_server.hpp"

namespace polybus::nsq::testing::detail {
namespace {

// What /stats shows, gathered once for both formats, in nsqd's order (topics and channels by
// name, clients in connection order).
struct ChannelView {
  const Channel* channel = nullptr;
  std::vector<ClientStats> clients;
  std::size_t client_count = 0;
};

struct TopicView {
  const Topic* topic = nullptr;
  std::vector<ChannelView> channels;
};

struct StatsView {
  bool topic_missing = false;  // nsqd then answers "topics":null
  std::vector<TopicView> topics;
  std::vector<ClientStats> producers;
};

StatsView gather(NsqdServer& server, const StatsQuery& query) {
  StatsView view;
  // In the order they connected (ids count up).
  std::map<std::uint64_t, const ClientConnection*> by_id;
  for (const auto& [id, connection] : server.connections()) by_id.emplace(id, connection.get());

  const auto& topics = server.broker().topics();
  if (!query.topic.empty() && topics.find(query.topic) == topics.end()) {
    view.topic_missing = true;
    return view;
  }
  for (const auto& [topic_name, topic] : topics) {
    if (!query.topic.empty() && topic_name != query.topic) continue;
    TopicView topic_view{topic.get(), {}};
    if (!query.channel.empty() && topic->find_channel(query.channel) == nullptr) continue;
    for (const auto& [channel_name, channel] : topic->channels()) {
      if (!query.channel.empty() && channel_name != query.channel) continue;
      ChannelView channel_view{channel.get(), {}, 0};
      for (const auto& [id, connection] : by_id) {
        if (connection->channel() != channel.get()) continue;
        ++channel_view.client_count;
        if (query.include_clients) channel_view.clients.push_back(connection->stats());
      }
      topic_view.channels.push_back(std::move(channel_view));
    }
    view.topics.push_back(std::move(topic_view));
  }
  if (query.include_clients) {
    for (const auto& [id, connection] : by_id) {
      if (!connection->producer()) continue;
      ClientStats stats = connection->stats();
      // nsqd lists one topic of a producer's, the asked one if any.
      std::map<std::string, std::uint64_t> shown;
      for (const auto& [topic, count] : stats.pub_counts) {
        if (!query.topic.empty() && topic != query.topic) continue;
        shown.emplace(topic, count);
        break;
      }
      stats.pub_counts = std::move(shown);
      view.producers.push_back(std::move(stats));
    }
  }
  return view;
}

const char* json_bool(bool value) {
  return value ? "true" : "false";
}

void append_client_json(std::string& out, const ClientStats& c) {
  out += "{\"client_id\":" + go_json_string(c.client_id);
  out += ",\"hostname\":" + go_json_string(c.hostname);
  out += ",\"version\":\"V2\"";
  out += ",\"remote_address\":" + go_json_string(c.remote_address);
  out += ",\"state\":" + std::to_string(c.state);
  out += ",\"ready_count\":" + std::to_string(c.ready_count);
  out += ",\"in_flight_count\":" + std::to_string(c.in_flight_count);
  out += ",\"message_count\":" + std::to_string(c.message_count);
  out += ",\"finish_count\":" + std::to_string(c.finish_count);
  out += ",\"requeue_count\":" + std::to_string(c.requeue_count);
  out += ",\"connect_ts\":" + std::to_string(c.connect_ts);
  out += ",\"sample_rate\":" + std::to_string(c.sample_rate);
  out += std::string(",\"deflate\":") + json_bool(c.deflate);
  out += std::string(",\"snappy\":") + json_bool(c.snappy);
  out += ",\"user_agent\":" + go_json_string(c.user_agent);
  if (c.authed) out += ",\"authed\":true";
  if (!c.auth_identity.empty()) out += ",\"auth_identity\":" + go_json_string(c.auth_identity);
  if (!c.pub_counts.empty()) {
    out += ",\"pub_counts\":[";
    bool first = true;
    for (const auto& [topic, count] : c.pub_counts) {
      if (!first) out += ",";
      first = false;
      out += "{\"topic\":" + go_json_string(topic) + ",\"count\":" + std::to_string(count) + "}";
    }
    out += "]";
  }
  out += std::string(",\"tls\":") + json_bool(c.tls);
  out += ",\"tls_cipher_suite\":" + go_json_string(c.tls_cipher_suite);
  out += ",\"tls_version\":" + go_json_string(c.tls_version);
  out += ",\"tls_negotiated_protocol\":\"\",\"tls_negotiated_protocol_is_mutual\":false}";
}

// nsqd's e2e latency percentiles: none without --e2e-processing-latency-percentile, which this
// server does not take.
constexpr const char* kNoLatency = R"("e2e_processing_latency":{"count":0,"percentiles":null})";

void append_clients_json(std::string& out, const std::vector<ClientStats>& clients, bool shown) {
  if (!shown) {
    out += "null";  // nsqd's nil slice
    return;
  }
  out += "[";
  for (std::size_t i = 0; i < clients.size(); ++i) {
    if (i > 0) out += ",";
    append_client_json(out, clients[i]);
  }
  out += "]";
}

std::string stored_bytes_memory(NsqdServer& server) {
  // Go's runtime figures have no counterpart here; the bodies held stand in for the heap in use.
  return std::to_string(server.broker().stored_bytes());
}

std::string connected_for(std::int64_t connect_ts) {
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  return go_duration(std::chrono::seconds(std::max<std::int64_t>(0, now - connect_ts)));
}

std::string client_line(const ClientStats& c) {
  const auto colon = c.remote_address.rfind(':');
  const std::string port = colon == std::string::npos ? "" : c.remote_address.substr(colon + 1);
  const std::string id = c.hostname + ":" + port + " " + c.user_agent;
  if (!c.pub_counts.empty()) {
    std::uint64_t total = 0;
    std::string topics;
    for (const auto& [topic, count] : c.pub_counts) {
      total += count;
      if (!topics.empty()) topics += ",";
      topics += topic + "=" + std::to_string(count);
    }
    return "[V2 " + go_pad(id, 21) + "] msgs: " + go_pad(std::to_string(total), 8) +
           " topics: " + topics + " connected: " + connected_for(c.connect_ts);
  }
  return "[V2 " + go_pad(id, 21) + "] state: " + std::to_string(c.state) +
         " inflt: " + go_pad(std::to_string(c.in_flight_count), 4) +
         " rdy: " + go_pad(std::to_string(c.ready_count), 4) +
         " fin: " + go_pad(std::to_string(c.finish_count), 8) +
         " re-q: " + go_pad(std::to_string(c.requeue_count), 8) +
         " msgs: " + go_pad(std::to_string(c.message_count), 8) +
         " connected: " + connected_for(c.connect_ts);
}

std::string rfc3339(std::int64_t seconds) {
  const std::time_t time = static_cast<std::time_t>(seconds);
  std::tm utc{};
  gmtime_r(&time, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

}  // namespace

std::string stats_json(NsqdServer& server, const StatsQuery& query) {
  const StatsView view = gather(server, query);
  std::string out = "{\"version\":\"1.3.0\",\"health\":\"OK\",\"start_time\":" +
                    std::to_string(server.start_time()) + ",\"topics\":";
  if (view.topic_missing) {
    out += "null";
  } else {
    out += "[";
    bool first_topic = true;
    for (const TopicView& t : view.topics) {
      if (!first_topic) out += ",";
      first_topic = false;
      out += "{\"topic_name\":" + go_json_string(t.topic->name()) + ",\"channels\":[";
      bool first_channel = true;
      for (const ChannelView& c : t.channels) {
        if (!first_channel) out += ",";
        first_channel = false;
        const Channel& ch = *c.channel;
        out += "{\"channel_name\":" + go_json_string(ch.name());
        out += ",\"depth\":" + std::to_string(ch.depth());
        out += ",\"backend_depth\":" + std::to_string(ch.backend_depth());
        out += ",\"in_flight_count\":" + std::to_string(ch.in_flight());
        out += ",\"deferred_count\":" + std::to_string(ch.deferred());
        out += ",\"message_count\":" + std::to_string(ch.message_count());
        out += ",\"requeue_count\":" + std::to_string(ch.requeue_count());
        out += ",\"timeout_count\":" + std::to_string(ch.timeout_count());
        out += ",\"client_count\":" + std::to_string(c.client_count);
        out += ",\"clients\":";
        append_clients_json(out, c.clients, query.include_clients);
        out += std::string(",\"paused\":") + json_bool(ch.paused());
        out += std::string(",") + kNoLatency + "}";
      }
      out += "],\"depth\":" + std::to_string(t.topic->depth());
      out += ",\"backend_depth\":" + std::to_string(t.topic->backend_depth());
      out += ",\"message_count\":" + std::to_string(t.topic->message_count);
      out += ",\"message_bytes\":" + std::to_string(t.topic->message_bytes);
      out += std::string(",\"paused\":") + json_bool(t.topic->paused);
      out += std::string(",") + kNoLatency + "}";
    }
    out += "]";
  }
  if (query.include_mem) {
    out += ",\"memory\":{\"heap_objects\":0,\"heap_idle_bytes\":0,\"heap_in_use_bytes\":" +
           stored_bytes_memory(server) +
           ",\"heap_released_bytes\":0,\"gc_pause_usec_100\":0,\"gc_pause_usec_99\":0,"
           "\"gc_pause_usec_95\":0,\"next_gc_bytes\":0,\"gc_total_runs\":0}";
  }
  out += ",\"producers\":";
  append_clients_json(out, view.producers, query.include_clients && !view.producers.empty());
  out += "}";
  return out;
}

std::string stats_text(NsqdServer& server, const StatsQuery& query) {
  const StatsView view = gather(server, query);
  const auto now = std::chrono::system_clock::now();
  const auto started =
      std::chrono::system_clock::time_point(std::chrono::seconds(server.start_time()));
  std::string out = "nsqd v1.3.0 (polybus)\n";
  out += "start_time " + rfc3339(server.start_time()) + "\n";
  out += "uptime " +
         go_duration(std::chrono::duration_cast<std::chrono::nanoseconds>(now - started)) + "\n";
  out += "\nHealth: OK\n";
  if (query.include_mem) {
    out += "\nMemory:\n";
    const std::pair<const char*, std::string> rows[] = {
        {"heap_objects", "0"},
        {"heap_idle_bytes", "0"},
        {"heap_in_use_bytes", stored_bytes_memory(server)},
        {"heap_released_bytes", "0"},
        {"gc_pause_usec_100", "0"},
        {"gc_pause_usec_99", "0"},
        {"gc_pause_usec_95", "0"},
        {"next_gc_bytes", "0"},
        {"gc_total_runs", "0"}};
    for (const auto& [name, value] : rows) out += "   " + go_pad(name, 25) + "\t" + value + "\n";
  }
  out += view.topics.empty() ? "\nTopics: None\n" : "\nTopics:";
  for (const TopicView& t : view.topics) {
    out += std::string("\n") + (t.topic->paused ? "*P " : "   ") + "[" +
           go_pad(t.topic->name(), 15) + "] depth: " + go_pad(std::to_string(t.topic->depth()), 5) +
           " be-depth: " + go_pad(std::to_string(t.topic->backend_depth()), 5) +
           " msgs: " + go_pad(std::to_string(t.topic->message_count), 8) + " e2e%: \n";
    for (const ChannelView& c : t.channels) {
      const Channel& ch = *c.channel;
      out += std::string(ch.paused() ? "   *P " : "      ") + "[" + go_pad(ch.name(), 25) +
             "] depth: " + go_pad(std::to_string(ch.depth()), 5) +
             " be-depth: " + go_pad(std::to_string(ch.backend_depth()), 5) +
             " inflt: " + go_pad(std::to_string(ch.in_flight()), 4) +
             " def: " + go_pad(std::to_string(ch.deferred()), 4) +
             " re-q: " + go_pad(std::to_string(ch.requeue_count()), 5) +
             " timeout: " + go_pad(std::to_string(ch.timeout_count()), 5) +
             " msgs: " + go_pad(std::to_string(ch.message_count()), 8) + " e2e%: \n";
      for (const ClientStats& client : c.clients) out += "        " + client_line(client) + "\n";
    }
  }
  if (view.producers.empty()) {
    out += "\nProducers: None\n";
  } else {
    out += "\nProducers:\n";
    for (const ClientStats& client : view.producers) out += "   " + client_line(client) + "\n";
  }
  return out;
}

}  // namespace polybus::nsq::testing::detail
