// SPDX-License-Identifier: Apache-2.0
#include "polybus/memodb/codec.hpp"

#include "polybus/error.hpp"
#include "polybus/text/text.hpp"

#include <cbor/callbacks.h>
#include <cbor/encoding.h>
#include <cbor/streaming.h>

#include <algorithm>

namespace polybus::memodb {
namespace {

// ---- encoding: libcbor's encoders pick the shortest head for every integer and length ----

template <typename Encode, typename Value>
void head(std::string& out, Encode encode, Value value) {
  unsigned char buffer[9];
  const std::size_t n = encode(value, buffer, sizeof buffer);
  out.append(reinterpret_cast<const char*>(buffer), n);
}

void text(std::string& out, std::string_view s) {
  head(out, cbor_encode_string_start, s.size());
  out.append(s);
}

void bytes(std::string& out, std::string_view s) {
  head(out, cbor_encode_bytestring_start, s.size());
  out.append(s);
}

void prologue(std::string& out, std::size_t fields, MessageType type, std::string_view id) {
  head(out, cbor_encode_array_start, fields);
  text(out, kProtocolVersion);
  head(out, cbor_encode_uint, static_cast<std::uint64_t>(type));
  bytes(out, id);
}

std::error_code check_id(std::string_view id) {
  return id.size() > kMaxIdLength ? make_error_code(errc::field_too_long) : std::error_code{};
}

// ---- decoding: one token per cbor_stream_decode call ----

struct Token {
  enum Kind {
    none,
    uint,
    negint,
    bytes,
    text,
    array,
    map,
    indefinite,  // indefinite-length string, array or map
    tag,
    floating,
    boolean,
    null_or_undefined,
    brk,
  } kind = none;
  std::uint64_t value = 0;  // uint; array length
  std::string_view data;    // bytes, text
  bool flag = false;        // boolean
};

Token& tok(void* context) {
  return *static_cast<Token*>(context);
}
void on_uint8(void* c, std::uint8_t v) {
  tok(c) = {Token::uint, v, {}, false};
}
void on_uint16(void* c, std::uint16_t v) {
  tok(c) = {Token::uint, v, {}, false};
}
void on_uint32(void* c, std::uint32_t v) {
  tok(c) = {Token::uint, v, {}, false};
}
void on_uint64(void* c, std::uint64_t v) {
  tok(c) = {Token::uint, v, {}, false};
}
void on_negint8(void* c, std::uint8_t) {
  tok(c).kind = Token::negint;
}
void on_negint16(void* c, std::uint16_t) {
  tok(c).kind = Token::negint;
}
void on_negint32(void* c, std::uint32_t) {
  tok(c).kind = Token::negint;
}
void on_negint64(void* c, std::uint64_t) {
  tok(c).kind = Token::negint;
}
void on_bytes(void* c, cbor_data data, std::size_t n) {
  tok(c) = {Token::bytes, 0, {reinterpret_cast<const char*>(data), n}, false};
}
void on_text(void* c, cbor_data data, std::size_t n) {
  tok(c) = {Token::text, 0, {reinterpret_cast<const char*>(data), n}, false};
}
void on_indefinite(void* c) {
  tok(c).kind = Token::indefinite;
}
void on_array(void* c, std::size_t n) {
  tok(c) = {Token::array, n, {}, false};
}
void on_map(void* c, std::size_t) {
  tok(c).kind = Token::map;
}
void on_tag(void* c, std::uint64_t) {
  tok(c).kind = Token::tag;
}
void on_float(void* c, float) {
  tok(c).kind = Token::floating;
}
void on_double(void* c, double) {
  tok(c).kind = Token::floating;
}
void on_null(void* c) {
  tok(c).kind = Token::null_or_undefined;
}
void on_bool(void* c, bool v) {
  tok(c) = {Token::boolean, 0, {}, v};
}
void on_break(void* c) {
  tok(c).kind = Token::brk;
}

cbor_callbacks make_callbacks() {
  cbor_callbacks cb = cbor_empty_callbacks;
  cb.uint8 = on_uint8;
  cb.uint16 = on_uint16;
  cb.uint32 = on_uint32;
  cb.uint64 = on_uint64;
  cb.negint8 = on_negint8;
  cb.negint16 = on_negint16;
  cb.negint32 = on_negint32;
  cb.negint64 = on_negint64;
  cb.byte_string = on_bytes;
  cb.byte_string_start = on_indefinite;
  cb.string = on_text;
  cb.string_start = on_indefinite;
  cb.array_start = on_array;
  cb.indef_array_start = on_indefinite;
  cb.map_start = on_map;
  cb.indef_map_start = on_indefinite;
  cb.tag = on_tag;
  cb.float2 = on_float;
  cb.float4 = on_float;
  cb.float8 = on_double;
  cb.undefined = on_null;
  cb.null = on_null;
  cb.boolean = on_bool;
  cb.indef_break = on_break;
  return cb;
}

const cbor_callbacks kCallbacks = make_callbacks();

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}

  std::error_code next(Token& t) {
    t = Token{};
    if (pos_ >= in_.size()) return make_error_code(errc::truncated);
    auto result = cbor_stream_decode(reinterpret_cast<cbor_data>(in_.data() + pos_),
                                     in_.size() - pos_, &kCallbacks, &t);
    if (result.status == CBOR_DECODER_NEDATA) return make_error_code(errc::truncated);
    if (result.status != CBOR_DECODER_FINISHED || t.kind == Token::none || t.kind == Token::brk)
      return make_error_code(errc::malformed_cbor);
    pos_ += result.read;
    return {};
  }
  std::string_view rest() const { return in_.substr(pos_); }

 private:
  std::string_view in_;
  std::size_t pos_ = 0;
};

// The error for a token that is not the scalar kind wanted.
std::error_code mismatch(const Token& t) {
  switch (t.kind) {
    case Token::indefinite:
      return make_error_code(errc::indefinite_length);
    case Token::array:
    case Token::map:
      return make_error_code(errc::nesting);
    default:
      return make_error_code(errc::wrong_type);
  }
}

std::error_code read_text(Reader& r, std::string_view& out) {
  Token t;
  if (auto ec = r.next(t)) return ec;
  if (t.kind != Token::text) return mismatch(t);
  out = t.data;
  return {};
}

std::error_code read_service(Reader& r, std::string_view& out) {
  if (auto ec = read_text(r, out)) return ec;
  return validate_service(out);
}

std::error_code expected_fields(MessageType type, std::uint64_t fields) {
  bool ok = false;
  switch (type) {
    case MessageType::ready:
      ok = fields == 4;
      break;
    case MessageType::job:
      ok = fields == 5;
      break;
    case MessageType::result:
      ok = fields == 3 || fields == 4;
      break;
    case MessageType::heartbeat:
    case MessageType::disconnect:
      ok = fields == 3;
      break;
  }
  return ok ? std::error_code{} : make_error_code(errc::wrong_field_count);
}

}  // namespace

const char* to_string(MessageType type) noexcept {
  switch (type) {
    case MessageType::ready:
      return "READY";
    case MessageType::job:
      return "JOB";
    case MessageType::result:
      return "RESULT";
    case MessageType::heartbeat:
      return "HEARTBEAT";
    case MessageType::disconnect:
      return "DISCONNECT";
  }
  return "?";
}

std::error_code validate_service(std::string_view name) {
  if (name.size() > kMaxServiceLength) return make_error_code(errc::field_too_long);
  if (name.empty() || !text::is_valid_utf8(name)) return make_error_code(errc::invalid_service);
  return {};
}

bool service_order(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return a.size() < b.size();
  return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return static_cast<unsigned char>(x) < static_cast<unsigned char>(y);
  });
}

std::vector<std::string> canonical_services(std::vector<std::string> names) {
  std::sort(names.begin(), names.end(),
            [](const std::string& a, const std::string& b) { return service_order(a, b); });
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

std::error_code append_ready(std::string& out, std::vector<std::string> services) {
  if (services.empty()) return make_error_code(errc::invalid_service);
  for (const auto& name : services)
    if (auto ec = validate_service(name)) return ec;
  services = canonical_services(std::move(services));
  if (services.size() > kMaxServices) return make_error_code(errc::field_too_long);
  prologue(out, 4, MessageType::ready, {});
  head(out, cbor_encode_array_start, services.size());
  for (const auto& name : services) text(out, name);
  return {};
}

std::error_code append_job(std::string& out, std::string_view id, std::string_view service,
                           std::uint64_t timeout_ms) {
  if (auto ec = check_id(id)) return ec;
  if (auto ec = validate_service(service)) return ec;
  prologue(out, 5, MessageType::job, id);
  text(out, service);
  head(out, cbor_encode_uint, timeout_ms);
  return {};
}

std::error_code append_result(std::string& out, std::string_view id,
                              std::optional<bool> disconnecting) {
  if (auto ec = check_id(id)) return ec;
  prologue(out, disconnecting ? 4 : 3, MessageType::result, id);
  if (disconnecting) head(out, cbor_encode_bool, *disconnecting);
  return {};
}

std::error_code append_heartbeat(std::string& out, std::string_view id) {
  if (auto ec = check_id(id)) return ec;
  prologue(out, 3, MessageType::heartbeat, id);
  return {};
}

std::error_code append_disconnect(std::string& out, std::string_view id) {
  if (auto ec = check_id(id)) return ec;
  prologue(out, 3, MessageType::disconnect, id);
  return {};
}

std::error_code decode(std::string_view message, Header& header, std::string_view& payload) {
  header = Header{};
  if (message.empty()) return make_error_code(errc::empty_message);
  Reader r(message);
  Token t;
  if (auto ec = r.next(t)) return ec;
  if (t.kind == Token::indefinite) return make_error_code(errc::indefinite_length);
  if (t.kind != Token::array) return make_error_code(errc::wrong_type);
  const std::uint64_t fields = t.value;
  if (fields < 3 || fields > 5) return make_error_code(errc::wrong_field_count);

  std::string_view version;
  if (auto ec = read_text(r, version)) return ec;
  if (version != kProtocolVersion) return make_error_code(errc::wrong_version);

  if (auto ec = r.next(t)) return ec;
  if (t.kind == Token::negint) return make_error_code(errc::unknown_type);
  if (t.kind != Token::uint) return mismatch(t);
  if (t.value < 1 || t.value > 5) return make_error_code(errc::unknown_type);
  header.type = static_cast<MessageType>(t.value);
  if (auto ec = expected_fields(header.type, fields)) return ec;

  if (auto ec = r.next(t)) return ec;
  if (t.kind != Token::bytes) return mismatch(t);
  if (t.data.size() > kMaxIdLength) return make_error_code(errc::field_too_long);
  header.id = t.data;

  switch (header.type) {
    case MessageType::ready: {
      if (auto ec = r.next(t)) return ec;
      if (t.kind == Token::indefinite) return make_error_code(errc::indefinite_length);
      if (t.kind != Token::array) return make_error_code(errc::wrong_type);
      if (t.value > kMaxServices) return make_error_code(errc::field_too_long);
      header.services.reserve(t.value);
      for (std::uint64_t i = 0; i < t.value; ++i) {
        std::string_view name;
        if (auto ec = read_service(r, name)) return ec;
        if (!header.services.empty() && !service_order(header.services.back(), name))
          return make_error_code(errc::unsorted_services);
        header.services.push_back(name);
      }
      break;
    }
    case MessageType::job: {
      if (auto ec = read_service(r, header.service)) return ec;
      if (auto ec = r.next(t)) return ec;
      if (t.kind != Token::uint) return mismatch(t);
      header.timeout_ms = t.value;
      break;
    }
    case MessageType::result:
      if (fields == 4) {
        if (auto ec = r.next(t)) return ec;
        if (t.kind != Token::boolean) return mismatch(t);
        header.disconnecting = t.flag;
      }
      break;
    case MessageType::heartbeat:
    case MessageType::disconnect:
      break;
  }
  payload = r.rest();
  return {};
}

}  // namespace polybus::memodb
