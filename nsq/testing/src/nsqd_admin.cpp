// SPDX-License-Identifier: Apache-2.0
#include "nsqd_admin.hpp"

#include <charconv>
#include <stdexcept>
#include <string>

#include "polybus/text/text.hpp"

namespace polybus::nsq::testing::detail {
namespace {

constexpr std::string_view kFaults = "/faults";

HttpResponse json(int status, std::string body) {
  HttpResponse response;
  response.status = status;
  response.content_type = "application/json";
  response.nsq_content_type = false;
  response.body = std::move(body) + "\n";
  return response;
}

HttpResponse message(int status, const std::string& what) {
  std::string body = "{\"message\":";
  text::append_json_quoted(body, what);
  return json(status, body + "}");
}

std::optional<std::uint64_t> number(std::string_view text) {
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

HttpResponse journal_lines(const polybus::testing::Journal& journal, const http::Request& request) {
  std::uint64_t since = 0;
  if (const auto given = request.query_parameter("since")) {
    const auto parsed = number(*given);
    if (!parsed) return message(400, "since: not a journal sequence number");
    since = *parsed;
  }
  HttpResponse response;
  response.content_type = "application/x-ndjson";
  response.nsq_content_type = false;
  for (const auto& entry :
       journal.entries([since](const polybus::testing::JournalEntry& e) { return e.seq > since; }))
    response.body += polybus::testing::Journal::json_line(entry) + "\n";
  return response;
}

HttpResponse faults_request(polybus::testing::FaultRules& faults, const http::Request& request) {
  std::string_view rest = std::string_view(request.path).substr(kFaults.size());
  if (rest.empty()) {
    if (request.method == "POST") {
      try {
        const auto id = faults.add(polybus::testing::parse_fault_rule(request.body));
        return json(200, "{\"id\":" + std::to_string(id) + "}");
      } catch (const std::invalid_argument& e) {
        return message(400, e.what());
      }
    }
    if (request.method == "DELETE") {
      faults.clear();
      return json(200, "{}");
    }
    HttpResponse refused = message(405, "POST a rule, or DELETE them all");
    refused.allow = "POST, DELETE";
    return refused;
  }
  const auto id = rest.front() == '/' ? number(rest.substr(1)) : std::nullopt;
  if (!id) return message(404, "no such path");
  if (request.method == "GET")
    return json(200, "{\"id\":" + std::to_string(*id) +
                         ",\"fired\":" + std::to_string(faults.fired(*id)) + "}");
  if (request.method == "DELETE")
    return faults.remove(*id) ? json(200, "{}")
                              : message(404, "no fault rule " + std::to_string(*id));
  HttpResponse refused = message(405, "GET or DELETE a rule");
  refused.allow = "GET, DELETE";
  return refused;
}

}  // namespace

HttpServer::Handlers admin_handlers(polybus::testing::Journal& journal,
                                    polybus::testing::FaultRules& faults) {
  HttpServer::Handlers handlers;
  handlers.respond = [&journal, &faults](const http::Request& request) {
    if (request.path == "/journal") {
      if (request.method != "GET") return message(405, "GET the journal");
      return journal_lines(journal, request);
    }
    if (request.path.compare(0, kFaults.size(), kFaults) == 0)
      return faults_request(faults, request);
    return message(404, "no such path: /journal and /faults are served here");
  };
  return handlers;
}

}  // namespace polybus::nsq::testing::detail
