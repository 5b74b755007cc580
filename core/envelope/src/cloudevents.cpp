// SPDX-License-Identifier: Apache-2.0
#include "polybus/cloudevents.hpp"

#include <rapidjson/error/en.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>

#include <algorithm>
#include <cstdio>
#include <ctime>

#include "polybus/text/text.hpp"

namespace polybus::cloudevents {

namespace {

constexpr unsigned kParseFlags =
    rapidjson::kParseIterativeFlag | rapidjson::kParseValidateEncodingFlag;
// A plain memory stream: RapidJSON's UTF-8 EncodedInputStream skips any of a BOM's bytes at the
// start, which text::is_valid_json (and JSON, RFC 8259 8.1) does not.
using Input = rapidjson::MemoryStream;

std::string_view media_type(std::string_view content_type) {
  content_type = content_type.substr(0, content_type.find(';'));
  return text::trim_http_space(content_type);
}

bool is_text_content_type(std::string_view content_type) {
  const std::string lower = text::ascii_lower(media_type(content_type));
  return lower.rfind("text/", 0) == 0;
}

// Reads the top-level object: attributes as headers, the raw text of `data`.
class EnvelopeReader : public rapidjson::BaseReaderHandler<rapidjson::UTF8<>, EnvelopeReader> {
 public:
  EnvelopeReader(std::string_view json, const Input& input, std::size_t max_depth, Event& out)
      : json_(json), input_(input), max_depth_(max_depth), out_(out) {}

  // Set when a handler callback refused the input (rapidjson then reports "terminated").
  std::string problem;
  bool has_data = false, has_data_base64 = false, data_is_string = false;
  std::string_view data_raw;  // the JSON text of `data`
  std::string data_base64;

  bool StartObject() {
    if (depth_ == 1 && !in_data()) return refuse("attribute '" + key_ + "' is an object");
    if (depth_ == 0) {
      ++depth_;
      return true;
    }
    if (depth_ == 1) data_start_ = value_start();
    return ++depth_ <= max_depth_ ||
           refuse("data nests deeper than max_json_depth=" + std::to_string(max_depth_ - 1));
  }
  bool StartArray() {
    if (depth_ == 0) return refuse("the event is not a JSON object");
    if (depth_ == 1 && !in_data()) return refuse("attribute '" + key_ + "' is an array");
    if (depth_ == 1) data_start_ = value_start();
    return ++depth_ <= max_depth_ ||
           refuse("data nests deeper than max_json_depth=" + std::to_string(max_depth_ - 1));
  }
  bool EndObject(rapidjson::SizeType) { return end_container(); }
  bool EndArray(rapidjson::SizeType) { return end_container(); }

  bool Key(const char* text, rapidjson::SizeType length, bool) {
    if (depth_ != 1) return true;
    key_.assign(text, length);
    key_end_ = input_.Tell();
    if (key_ == "data"          ? has_data
        : key_ == "data_base64" ? has_data_base64
                                : out_.headers.contains(key_))
      return refuse("attribute '" + key_ + "' appears twice");
    if (++attributes_ > kMaxAttributes)
      return refuse("more than " + std::to_string(kMaxAttributes) + " attributes");
    return true;
  }

  bool String(const char* text, rapidjson::SizeType length, bool) {
    if (depth_ == 0) return refuse("the event is not a JSON object");
    if (depth_ > 1) return true;
    if (key_ == "data") {
      has_data = true;
      data_is_string = true;
      data_raw = json_.substr(value_start(), input_.Tell() - value_start());
      out_.storage.assign(text, length);
      return true;
    }
    if (key_ == "data_base64") {
      has_data_base64 = true;
      data_base64.assign(text, length);
      return true;
    }
    out_.headers.set(key_, std::string(text, length));
    return true;
  }
  bool Null() {
    if (depth_ == 0) return refuse("the event is not a JSON object");
    return true;  // an attribute (data too) set to null is absent
  }
  bool Bool(bool b) { return scalar(b ? "true" : "false"); }
  bool Int(int) { return number(); }
  bool Uint(unsigned) { return number(); }
  bool Int64(std::int64_t) { return number(); }
  bool Uint64(std::uint64_t) { return number(); }
  bool Double(double) { return number(); }

 private:
  bool in_data() const { return key_ == "data"; }
  bool refuse(std::string why) {
    problem = std::move(why);
    return false;
  }
  // Where the value after the current key starts: past blanks, the colon and blanks again.
  std::size_t value_start() const {
    std::size_t at = key_end_;
    while (at < json_.size() && (json_[at] == ' ' || json_[at] == '\t' || json_[at] == '\n' ||
                                 json_[at] == '\r' || json_[at] == ':'))
      ++at;
    return at;
  }
  bool end_container() {
    if (--depth_ == 1) {
      // The iterative parser calls EndObject/EndArray before it takes the closing bracket.
      std::size_t end = input_.Tell();
      if (end < json_.size() && (json_[end] == '}' || json_[end] == ']')) ++end;
      has_data = true;
      data_raw = json_.substr(data_start_, end - data_start_);
    }
    return true;
  }
  bool scalar_data() {
    has_data = true;
    data_raw = json_.substr(value_start(), input_.Tell() - value_start());
    return true;
  }
  bool scalar(std::string_view text) {
    if (depth_ == 0) return refuse("the event is not a JSON object");
    if (depth_ > 1) return true;
    if (in_data()) return scalar_data();
    if (key_ == "data_base64") return refuse("data_base64 is not a string");
    out_.headers.set(key_, std::string(text));
    return true;
  }
  bool number() {
    if (depth_ == 0) return refuse("the event is not a JSON object");
    if (depth_ > 1) return true;
    const std::string_view raw = json_.substr(value_start(), input_.Tell() - value_start());
    return scalar(raw);
  }

  std::string_view json_;
  const Input& input_;
  std::size_t max_depth_;
  Event& out_;
  std::size_t depth_ = 0;
  std::size_t attributes_ = 0;
  std::string key_;
  std::size_t key_end_ = 0;
  std::size_t data_start_ = 0;
};

std::string required(const Event& event, std::string_view name) {
  auto value = event.headers.get(name);
  if (!value) return "no " + std::string(name) + " attribute";
  if (value->empty()) return "the " + std::string(name) + " attribute is empty";
  return {};
}

}  // namespace

std::string check_header_name(std::string_view name) {
  if (name == "specversion" || name == "data" || name == "data_base64")
    return "header '" + std::string(name) + "' is the envelope's own attribute";
  if (name.empty()) return "a header name is empty";
  if (name.size() > kMaxNameLength)
    return "header '" + std::string(name) + "' is " + std::to_string(name.size()) +
           " characters; CloudEvents attribute names have at most " +
           std::to_string(kMaxNameLength);
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')))
      return "header '" + std::string(name) + "' has '" + std::string(1, c) + "' at " +
             std::to_string(i) + "; CloudEvents attribute names are a-z and 0-9 only";
  }
  return {};
}

bool is_json_content_type(std::string_view content_type) {
  const std::string lower = text::ascii_lower(media_type(content_type));
  return lower == "application/json" || lower == "text/json" ||
         (lower.size() > 5 && lower.compare(lower.size() - 5, 5, "+json") == 0);
}

std::string encode(std::string_view payload, const Headers& headers, const Defaults& defaults,
                   std::size_t max_json_depth, std::string& out) {
  for (const auto& [name, value] : headers) {
    if (auto why = check_header_name(name); !why.empty()) return why;
    if (!text::is_valid_utf8(value)) return "header '" + name + "' is not valid UTF-8";
    if ((name == "id" || name == "source" || name == "type") && value.empty())
      return "header '" + name + "' is empty; CloudEvents requires it";
  }
  const auto content_type = headers.get("datacontenttype");
  enum class Data { json, text, base64 } data;
  if (content_type && is_json_content_type(*content_type)) {
    if (!text::is_valid_json(payload, max_json_depth))
      return "datacontenttype '" + std::string(*content_type) +
             "' says JSON, but the payload is not valid JSON (or nests deeper than " +
             std::to_string(max_json_depth) + ")";
    // `data` holds the value, not the white space around it: such a payload goes as bytes.
    data = text::trim_json_space(payload).size() == payload.size() ? Data::json : Data::base64;
  } else if (text::is_valid_utf8(payload) &&
             (!content_type || is_text_content_type(*content_type))) {
    data = Data::text;
  } else {
    data = Data::base64;
  }

  const std::size_t start = out.size();
  out.reserve(start + payload.size() + 160);
  out += "{\"specversion\":\"1.0\"";
  auto attribute = [&](std::string_view name, std::string_view value) {
    out += ",\"";
    out += name;  // checked: a-z and 0-9
    out += "\":";
    text::append_json_quoted(out, value);
  };
  for (auto [name, fallback] : {std::pair<std::string_view, std::string_view>{"id", defaults.id},
                                {"source", defaults.source},
                                {"type", defaults.type},
                                {"time", defaults.time}}) {
    const auto given = headers.get(name);
    if (given)
      attribute(name, *given);
    else if (!fallback.empty())
      attribute(name, fallback);
  }
  if (!content_type) {
    attribute("datacontenttype",
              data == Data::text ? "text/plain; charset=utf-8" : "application/octet-stream");
  }
  for (const auto& [name, value] : headers) {
    if (name == "id" || name == "source" || name == "type" || name == "time") continue;
    attribute(name, value);
  }
  switch (data) {
    case Data::json:
      out += ",\"data\":";
      out += payload;
      break;
    case Data::text:
      out += ",\"data\":";
      text::append_json_quoted(out, payload);
      break;
    case Data::base64:
      out += ",\"data_base64\":\"";
      text::append_base64(out, payload);
      out += '"';
      break;
  }
  out += '}';
  return {};
}

std::string decode(std::string_view json, std::size_t max_json_depth, Event& out) {
  out.payload = {};
  out.storage.clear();
  out.headers.clear();
  out.headers.reserve(8);  // the usual attributes, in one allocation
  // RapidJSON takes a NUL for the end of the input: what follows one would go unread.
  if (const auto nul = json.find('\0'); nul != std::string_view::npos)
    return "a NUL byte at byte " + std::to_string(nul);
  Input input(json.data(), json.size());
  rapidjson::Reader reader;
  EnvelopeReader envelope(json, input, max_json_depth + 1, out);
  const auto result = reader.Parse<kParseFlags>(input, envelope);
  if (result.IsError()) {
    const std::string at = " at byte " + std::to_string(result.Offset());
    if (!envelope.problem.empty()) return envelope.problem + at;
    return std::string("not JSON: ") + rapidjson::GetParseError_En(result.Code()) + at;
  }
  if (auto version = out.headers.get("specversion"); !version || *version != kSpecVersion)
    return version ? "specversion '" + std::string(*version) + "' is not 1.0" : "no specversion";
  for (auto name : {"id", "source", "type"})
    if (auto why = required(out, name); !why.empty()) return why;
  if (envelope.has_data && envelope.has_data_base64) return "both data and data_base64";
  if (envelope.has_data_base64) {
    std::size_t bad_at = 0;
    if (!text::base64_decode(envelope.data_base64, out.storage, bad_at))
      return "data_base64 is not base64 (at character " + std::to_string(bad_at) + ")";
    out.payload = out.storage;
    return {};
  }
  if (!envelope.has_data) return {};
  const auto content_type = out.headers.get("datacontenttype");
  if (envelope.data_is_string && !(content_type && is_json_content_type(*content_type))) {
    out.payload = out.storage;  // text: the string itself
  } else {
    out.payload = envelope.data_raw;  // JSON: its text, a view into `json`
  }
  return {};
}

std::size_t format_time(std::int64_t unix_ns, char (&out)[kTimeLength + 1]) {
  const std::time_t seconds = static_cast<std::time_t>(unix_ns / 1'000'000'000);
  const long micros = static_cast<long>((unix_ns % 1'000'000'000) / 1000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  const std::size_t n = std::strftime(out, sizeof out, "%Y-%m-%dT%H:%M:%S", &utc);
  const int tail = std::snprintf(out + n, sizeof out - n, ".%06ldZ", micros);
  return tail > 0 ? std::min(n + static_cast<std::size_t>(tail), kTimeLength) : n;
}

std::string format_time(std::int64_t unix_ns) {
  char buffer[kTimeLength + 1];
  return std::string(buffer, format_time(unix_ns, buffer));
}

}  // namespace polybus::cloudevents
