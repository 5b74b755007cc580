// SPDX-License-Identifier: Apache-2.0
#include "nsqd_http.hpp"

#include <rapidjson/document.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "go_query.hpp"
#include "go_text.hpp"
#include "nsqd_server.hpp"
#include "nsqd_stats.hpp"
#include "polybus/nsq/codec.hpp"
#include "polybus/text/big_endian.hpp"

namespace polybus::nsq::testing::detail {
namespace {

using Request = http::Request;

// nsqd's boolParams: anything else is "not given".
std::optional<bool> go_bool_param(const std::optional<std::string>& value) {
  if (!value) return std::nullopt;
  if (*value == "true" || *value == "1") return true;
  if (*value == "false" || *value == "0") return false;
  return std::nullopt;
}

// The request's query parsed as Go's url.ParseQuery would: `valid` false when it is malformed.
class Query {
 public:
  explicit Query(const Request& request) : raw_(request.query) {
    query_value(raw_, "", valid_);  // validates the whole query once
  }
  bool valid() const { return valid_; }
  std::optional<std::string> get(std::string_view key) const {
    bool ignored = true;
    return query_value(raw_, key, ignored);
  }

 private:
  std::string raw_;
  bool valid_ = true;
};

std::int64_t nanoseconds(std::chrono::milliseconds value) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(value).count();
}

class Api {
 public:
  explicit Api(NsqdServer& server) : server_(server) {}

  std::optional<HttpResponse> before_body(const Request& request) {
    if (!request.content_length) return std::nullopt;
    const std::uint64_t length = *request.content_length;
    const NsqdOptions& options = server_.options();
    // nsqd refuses a declared length past its bound before reading the body.
    if (request.method == "POST" && request.path == "/pub" &&
        length > static_cast<std::uint64_t>(options.max_msg_size)) {
      return v1_error(413, "MSG_TOO_BIG");
    }
    if (request.method == "POST" && request.path == "/mpub" &&
        length > static_cast<std::uint64_t>(options.max_body_size)) {
      return v1_error(413, "BODY_TOO_BIG");
    }
    return std::nullopt;
  }

  // A length past every bound: what nsqd would answer for it on these two routes.
  std::optional<HttpResponse> too_large(const Request& request) {
    if (request.method != "POST") return std::nullopt;
    if (request.path == "/pub") return v1_error(413, "MSG_TOO_BIG");
    if (request.path == "/mpub") return v1_error(413, "BODY_TOO_BIG");
    return std::nullopt;
  }

  HttpResponse respond(const Request& request) {
    const std::string& path = request.path;
    std::string option;
    std::vector<std::string> methods;  // the route's, sorted as httprouter lists them
    if (path == "/ping" || path == "/info" || path == "/stats") {
      methods = {"GET"};
    } else if (path == "/pub" || path == "/mpub" || path == "/topic/create" ||
               path == "/topic/delete" || path == "/topic/empty" || path == "/topic/pause" ||
               path == "/topic/unpause" || path == "/channel/create" || path == "/channel/delete" ||
               path == "/channel/empty" || path == "/channel/pause" || path == "/channel/unpause") {
      methods = {"POST"};
    } else if (path.rfind("/config/", 0) == 0 && path.size() > 8 &&
               path.find('/', 8) == std::string::npos) {
      methods = {"GET", "PUT"};
      option = path.substr(8);
    } else {
      return v1_error(404, "NOT_FOUND");
    }
    if (server_.options().tls_required == NsqdOptions::TlsRequired::yes) {
      // Every plain HTTP request, as nsqd's ServeHTTP answers it (this server has no HTTPS).
      return HttpResponse{403,
                          "application/json; charset=utf-8",
                          true,
                          R"({"message": "TLS_REQUIRED", "https_port": 0})",
                          {}};
    }
    if (std::find(methods.begin(), methods.end(), request.method) == methods.end()) {
      methods.push_back("OPTIONS");
      std::sort(methods.begin(), methods.end());
      std::string allow;
      for (const std::string& method : methods) allow += (allow.empty() ? "" : ", ") + method;
      if (request.method == "OPTIONS") return HttpResponse{200, {}, false, {}, allow};
      return v1_method_not_allowed(allow);
    }
    if (path == "/ping") return HttpResponse{200, "text/plain; charset=utf-8", false, "OK", {}};
    if (path == "/info") return info();
    if (path == "/stats") return stats(request);
    if (path == "/pub") return pub(request);
    if (path == "/mpub") return mpub(request);
    if (path.rfind("/topic/", 0) == 0) return topic_action(request, path.substr(7));
    if (path.rfind("/channel/", 0) == 0) return channel_action(request, path.substr(9));
    return config(request, option);
  }

 private:
  HttpResponse info() {
    const NsqdOptions& options = server_.options();
    return v1_json("{\"version\":\"1.3.0\",\"broadcast_address\":" +
                   go_json_string(server_.broadcast_address()) +
                   ",\"hostname\":" + go_json_string(host_name()) +
                   ",\"http_port\":" + std::to_string(server_.http_port()) +
                   ",\"tcp_port\":" + std::to_string(server_.port()) + ",\"start_time\":" +
                   std::to_string(server_.start_time()) + ",\"max_heartbeat_interval\":" +
                   std::to_string(nanoseconds(options.max_heartbeat_interval)) +
                   ",\"max_output_buffer_size\":" + std::to_string(options.max_output_buffer_size) +
                   ",\"max_output_buffer_timeout\":" +
                   std::to_string(nanoseconds(options.max_output_buffer_timeout)) +
                   ",\"max_deflate_level\":" + std::to_string(options.max_deflate_level) + "}");
  }

  HttpResponse stats(const Request& request) {
    const Query query(request);
    if (!query.valid()) return v1_error(400, "INVALID_REQUEST");
    StatsQuery asked;
    asked.topic = query.get("topic").value_or("");
    asked.channel = query.get("channel").value_or("");
    asked.include_clients = go_bool_param(query.get("include_clients")).value_or(true);
    asked.include_mem = go_bool_param(query.get("include_mem")).value_or(true);
    if (query.get("format").value_or("") == "json") return v1_json(stats_json(server_, asked));
    return v1_text(stats_text(server_, asked));
  }

  // nsqd's getTopicFromQuery: the topic named in the query, created if need be.
  std::optional<HttpResponse> topic_from_query(const Query& query, std::string& topic) {
    if (!query.valid()) return v1_error(400, "INVALID_REQUEST");
    const auto name = query.get("topic");
    if (!name) return v1_error(400, "MISSING_ARG_TOPIC");
    if (!valid_topic_name(*name)) return v1_error(400, "INVALID_TOPIC");
    topic = *name;
    server_.broker().topic(topic);
    return std::nullopt;
  }

  HttpResponse pub(const Request& request) {
    const NsqdOptions& options = server_.options();
    if (request.body.size() > static_cast<std::size_t>(options.max_msg_size)) {
      return v1_error(413, "MSG_TOO_BIG");
    }
    if (request.body.empty()) return v1_error(400, "MSG_EMPTY");
    const Query query(request);
    std::string topic;
    if (auto refused = topic_from_query(query, topic)) return *refused;
    std::chrono::milliseconds defer{0};
    if (const auto text = query.get("defer")) {
      std::int64_t value = 0;
      const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), value);
      if (ec != std::errc() || end != text->data() + text->size() || value < 0 ||
          value > options.max_req_timeout.count()) {
        return v1_error(400, "INVALID_DEFER");
      }
      defer = std::chrono::milliseconds(value);
    }
    if (!server_.broker().publish(topic, {request.body}, defer)) return memory_full();
    return v1_text("OK");
  }

  HttpResponse mpub(const Request& request) {
    const NsqdOptions& options = server_.options();
    const Query query(request);
    std::string topic;
    if (auto refused = topic_from_query(query, topic)) return *refused;
    // Text mode unless binary is given; a value other than Go's booleans counts as true.
    const auto binary_text = query.get("binary");
    const bool binary = binary_text && go_bool_param(binary_text).value_or(true);
    std::vector<std::string> messages;
    std::string_view body = request.body;
    if (binary) {
      if (body.size() < 4) return v1_error(413, "BAD_BODY");
      const auto count =
          static_cast<std::int32_t>(static_cast<std::uint32_t>(read_big_endian<4>(body.data())));
      body.remove_prefix(4);
      if (count <= 0 || count > (options.max_body_size - 4) / 5) return v1_error(413, "BAD_BODY");
      for (std::int32_t i = 0; i < count; ++i) {
        if (body.size() < 4) return v1_error(413, "BAD_MESSAGE");
        const auto size =
            static_cast<std::int32_t>(static_cast<std::uint32_t>(read_big_endian<4>(body.data())));
        body.remove_prefix(4);
        if (size <= 0 || size > options.max_msg_size ||
            body.size() < static_cast<std::size_t>(size)) {
          return v1_error(413, "BAD_MESSAGE");
        }
        messages.emplace_back(body.substr(0, static_cast<std::size_t>(size)));
        body.remove_prefix(static_cast<std::size_t>(size));
      }
    } else {
      while (!body.empty()) {
        const std::size_t end = body.find('\n');
        const std::string_view line = body.substr(0, end);
        body.remove_prefix(end == std::string_view::npos ? body.size() : end + 1);
        if (line.empty()) continue;  // nsqd drops empty lines
        if (line.size() > static_cast<std::size_t>(options.max_msg_size)) {
          return v1_error(413, "MSG_TOO_BIG");
        }
        messages.emplace_back(line);
      }
    }
    if (!messages.empty() &&
        !server_.broker().publish(topic, std::move(messages), std::chrono::milliseconds(0))) {
      return memory_full();
    }
    return v1_text("OK");
  }

  // nsqd never refuses a publish it has read; this broker's memory bound is its own.
  static HttpResponse memory_full() { return v1_error(503, "MEMORY_LIMIT"); }

  HttpResponse topic_action(const Request& request, const std::string& action) {
    const Query query(request);
    if (action == "create") {
      std::string topic;
      if (auto refused = topic_from_query(query, topic)) return *refused;
      return v1_empty();
    }
    if (!query.valid()) return v1_error(400, "INVALID_REQUEST");
    const auto name = query.get("topic");
    if (!name) return v1_error(400, "MISSING_ARG_TOPIC");
    Broker& broker = server_.broker();
    if (action == "delete") {
      return broker.delete_topic(*name) ? v1_empty() : v1_error(404, "TOPIC_NOT_FOUND");
    }
    if (action == "empty" && !valid_topic_name(*name)) return v1_error(400, "INVALID_TOPIC");
    Topic* topic = broker.find_topic(*name);
    if (topic == nullptr) return v1_error(404, "TOPIC_NOT_FOUND");
    if (action == "empty") {
      broker.empty_topic(*topic);
    } else {
      broker.set_topic_paused(*topic, action == "pause");
    }
    server_.state_changed();
    return v1_empty();
  }

  HttpResponse channel_action(const Request& request, const std::string& action) {
    const Query query(request);
    if (!query.valid()) return v1_error(400, "INVALID_REQUEST");
    // nsqd's GetTopicChannelArgs, then the topic must exist.
    const auto topic_name = query.get("topic");
    if (!topic_name) return v1_error(400, "MISSING_ARG_TOPIC");
    if (!valid_topic_name(*topic_name)) return v1_error(400, "INVALID_ARG_TOPIC");
    const auto channel_name = query.get("channel");
    if (!channel_name) return v1_error(400, "MISSING_ARG_CHANNEL");
    if (!valid_channel_name(*channel_name)) return v1_error(400, "INVALID_ARG_CHANNEL");
    Broker& broker = server_.broker();
    Topic* topic = broker.find_topic(*topic_name);
    if (topic == nullptr) return v1_error(404, "TOPIC_NOT_FOUND");
    if (action == "create") {
      broker.channel(*topic, *channel_name);
      server_.state_changed();
      return v1_empty();
    }
    if (action == "delete") {
      if (!broker.delete_channel(*topic, *channel_name)) return v1_error(404, "CHANNEL_NOT_FOUND");
      server_.state_changed();
      return v1_empty();
    }
    Channel* channel = topic->find_channel(*channel_name);
    if (channel == nullptr) return v1_error(404, "CHANNEL_NOT_FOUND");
    if (action == "empty") {
      broker.empty_channel(*channel);
    } else {
      broker.set_channel_paused(*channel, action == "pause");
    }
    server_.state_changed();
    return v1_empty();
  }

  // GET /config/OPT answers the option as JSON; PUT changes the two nsqd lets change.
  HttpResponse config(const Request& request, const std::string& option) {
    if (request.method == "PUT") {
      const NsqdOptions& options = server_.options();
      if (request.body.empty() ||
          request.body.size() > static_cast<std::size_t>(options.max_msg_size)) {
        return v1_error(413, "INVALID_VALUE");
      }
      if (option == "nsqlookupd_tcp_addresses") {
        rapidjson::Document document;
        document.Parse(request.body.data(), request.body.size());
        if (document.HasParseError() || !document.IsArray()) return v1_error(400, "INVALID_VALUE");
        std::vector<std::string> addresses;
        for (const auto& value : document.GetArray()) {
          if (!value.IsString()) return v1_error(400, "INVALID_VALUE");
          addresses.emplace_back(value.GetString(), value.GetStringLength());
        }
        server_.set_lookupd_tcp_addresses(std::move(addresses));
      } else if (option == "log_level") {
        static const char* const kLevels[] = {"debug", "info", "warn", "error", "fatal"};
        std::string level = request.body;
        std::transform(level.begin(), level.end(), level.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        if (std::find(std::begin(kLevels), std::end(kLevels), level) == std::end(kLevels)) {
          return v1_error(400, "INVALID_VALUE");
        }
        log_level_ = level;
      } else {
        return v1_error(400, "INVALID_OPTION");
      }
    }
    const std::optional<std::string> value = option_json(option);
    if (!value) return v1_error(400, "INVALID_OPTION");
    return v1_json(*value);
  }

  std::optional<std::string> option_json(const std::string& option) const {
    const NsqdOptions& o = server_.options();
    const auto address = [](const std::string& host, std::uint16_t port) {
      return go_json_string(host + ":" + std::to_string(port));
    };
    const auto boolean = [](bool value) { return std::string(value ? "true" : "false"); };
    const std::map<std::string, std::string> values = {
        {"nsqlookupd_tcp_addresses", go_json_string_array(server_.lookupd_tcp_addresses())},
        {"log_level", std::to_string(log_level_number())},
        {"tcp_address", address(o.tcp_host, server_.port())},
        {"http_address", o.http_port ? address(o.http_host, server_.http_port()) : "\"\""},
        {"broadcast_address", go_json_string(server_.broadcast_address())},
        {"mem_queue_size", std::to_string(o.mem_queue_size)},
        {"data_path", go_json_string(o.data_path)},
        {"msg_timeout", std::to_string(nanoseconds(o.msg_timeout))},
        {"max_msg_timeout", std::to_string(nanoseconds(o.max_msg_timeout))},
        {"max_req_timeout", std::to_string(nanoseconds(o.max_req_timeout))},
        {"max_msg_size", std::to_string(o.max_msg_size)},
        {"max_body_size", std::to_string(o.max_body_size)},
        {"max_rdy_count", std::to_string(o.max_rdy_count)},
        {"max_heartbeat_interval", std::to_string(nanoseconds(o.max_heartbeat_interval))},
        {"max_output_buffer_size", std::to_string(o.max_output_buffer_size)},
        {"max_output_buffer_timeout", std::to_string(nanoseconds(o.max_output_buffer_timeout))},
        {"snappy", boolean(o.snappy)},
        {"deflate", boolean(o.deflate)},
        {"max_deflate_level", std::to_string(o.max_deflate_level)},
        {"tls_cert", go_json_string(o.tls_cert_file)},
        {"tls_key", go_json_string(o.tls_key_file)},
        {"tls_root_ca_file", go_json_string(o.tls_root_ca_file)},
        {"tls_required", o.tls_required == NsqdOptions::TlsRequired::no            ? "0"
                         : o.tls_required == NsqdOptions::TlsRequired::except_http ? "1"
                                                                                   : "2"},
        {"tls_min_version", std::to_string(o.tls_min_version)},
    };
    const auto found = values.find(option);
    if (found == values.end()) return std::nullopt;
    return found->second;
  }

  // nsq's lg.LogLevel values, as /config/log_level answers them.
  int log_level_number() const {
    if (log_level_ == "debug") return 1;
    if (log_level_ == "warn") return 3;
    if (log_level_ == "error") return 4;
    if (log_level_ == "fatal") return 5;
    return 2;
  }

  NsqdServer& server_;
  std::string log_level_ = "info";
};

}  // namespace

std::size_t http_body_limit(const NsqdOptions& options) {
  return static_cast<std::size_t>(std::max(options.max_body_size, options.max_msg_size));
}

HttpServer::Handlers http_handlers(NsqdServer& server) {
  auto api = std::make_shared<Api>(server);
  return HttpServer::Handlers{[api](const Request& request) { return api->before_body(request); },
                              [api](const Request& request) { return api->respond(request); },
                              [api](const Request& request) { return api->too_large(request); },
                              &server.journal(), &server.faults()};
}

}  // namespace polybus::nsq::testing::detail
