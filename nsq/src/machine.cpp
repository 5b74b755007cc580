// SPDX-License-Identifier: Apache-2.0
#include "machine.hpp"

#include "polybus/adapter/budget.hpp"
#include "polybus/error.hpp"

namespace polybus::nsq {

Machine::Machine(MachineConfig config, MachineHandler& handler)
    : config_(std::move(config)), handler_(handler), parser_(config_.max_frame_size) {}

void Machine::start() {
  std::string out;
  append_magic(out);
  if (auto ec = append_identify(out, config_.identify.to_json()))
    return fail(ec, "cannot encode IDENTIFY: " + ec.message());
  phase_ = Phase::identifying;
  emit(std::move(out));
}

void Machine::emit(std::string bytes) {
  if (codec_) {
    std::string encoded;
    if (auto ec = codec_->encode(bytes, encoded))
      return fail(ec, "compression failed: " + ec.message());
    handler_.send(std::move(encoded));
  } else {
    handler_.send(std::move(bytes));
  }
}

void Machine::emit_scratch() {
  if (codec_) {
    std::string encoded;
    if (auto ec = codec_->encode(scratch_, encoded))
      return fail(ec, "compression failed: " + ec.message());
    handler_.send(std::move(encoded));
  } else {
    handler_.send_copy(scratch_);
  }
  // A compressed PUB built its body in here: give back what a large one took.
  if (scratch_.capacity() > 64 * 1024) std::string().swap(scratch_);
}

void Machine::fail(std::error_code ec, const std::string& detail) {
  if (phase_ == Phase::failed) return;
  phase_ = Phase::failed;
  handler_.on_failure(ec, detail);
}

void Machine::receive(const std::shared_ptr<const void>& owner, std::string_view bytes) {
  if (phase_ == Phase::failed || phase_ == Phase::idle) return;
  decode(owner, bytes);
  if (heartbeat_due_ && phase_ != Phase::failed) {
    heartbeat_due_ = false;
    if (!handler_.heartbeat_answer_unsent()) {
      scratch_.clear();
      append_nop(scratch_);
      emit_scratch();
      handler_.sent_heartbeat_answer();
    }
    handler_.on_heartbeat();
  }
}

void Machine::decode(const std::shared_ptr<const void>& owner, std::string_view bytes) {
  if (!codec_) return feed(owner, bytes);
  decoded_.clear();
  if (auto ec = codec_->decode(bytes, decoded_)) {
    if (ec == compression_errc::output_limit_exceeded)
      return fail(
          make_error_code(polybus::errc::limit_exceeded),
          "cannot decompress the stream from nsqd: " +
              limit_exceeded_text("decompressed bytes from one read", "max_decoded_per_read",
                                  config_.max_decoded_per_read, config_.max_decoded_per_read + 1));
    return fail(ec, "cannot decompress the stream from nsqd: " + ec.message());
  }
  // The decoded bytes live in decoded_, which the next receive() overwrites: frames copy.
  feed(nullptr, decoded_);
  // A burst that decompressed large must not keep its buffer for the connection's life.
  if (decoded_.capacity() > 1024 * 1024) std::string().swap(decoded_);
}

void Machine::feed(const std::shared_ptr<const void>& owner, std::string_view bytes) {
  while (!bytes.empty() && phase_ != Phase::failed) {
    Frame frame;
    auto result = parser_.feed(bytes, frame);
    if (result.error)
      return fail(
          result.error,
          result.error == errc::frame_too_large
              ? "a frame from nsqd declares " + std::to_string(parser_.declared_size()) +
                    " bytes: exceeds max_frame_size=" + std::to_string(parser_.max_frame_size())
              : "bad frame from nsqd: " + result.error.message());
    bytes.remove_prefix(result.consumed);
    if (!result.has_frame) continue;
    ++frames_;
    handle(frame, frame.in_parser_buffer ? nullptr : owner);
    if (codec_pending_) {
      // nsqd switched to compression after this frame: the rest of the input is compressed.
      codec_pending_ = false;
      if (bytes.empty()) return;
      std::string rest(bytes);
      return decode(nullptr, rest);
    }
  }
}

void Machine::handle(const Frame& frame, const std::shared_ptr<const void>& owner) {
  switch (frame.type) {
    case FrameType::error: {
      ServerError error = parse_server_error(frame.body);
      handler_.on_server_error(error);
      if (error.fatal || phase_ != Phase::ready)
        fail(make_error_code(error.code),
             "nsqd answered " + std::string(frame.body.substr(0, 512)));
      return;
    }
    case FrameType::message: {
      if (phase_ != Phase::ready)
        return fail(make_error_code(polybus::errc::protocol_error),
                    "nsqd sent a message before the handshake ended");
      MessageView message;
      if (auto ec = parse_message(frame.body, message))
        return fail(ec, "bad message frame: " + ec.message());
      std::shared_ptr<const void> keep = owner;
      if (!keep) {
        // The body is in a buffer that the next frame overwrites: copy this one.
        const std::string_view copy = kept_.keep(frame.body, keep);
        if (auto ec = parse_message(copy, message)) return fail(ec, "bad message frame");
      }
      handler_.on_message(message, keep);
      return;
    }
    case FrameType::response:
      if (is_heartbeat(frame.body)) {
        heartbeat_due_ = true;  // answered once at the end of receive()
        return;
      }
      if (phase_ == Phase::ready) return handler_.on_response(frame.body);
      return handshake_response(frame.body);
  }
}

void Machine::handshake_response(std::string_view body) {
  switch (phase_) {
    case Phase::identifying: {
      if (auto ec = parse_identify_response(body, negotiated_))
        return fail(ec, "bad IDENTIFY response: " + ec.message());
      if (config_.identify.tls_v1 && !negotiated_.tls_v1)
        return fail(make_error_code(polybus::errc::tls_error),
                    "TLS was requested but nsqd did not agree to it (is it configured for TLS?)");
      if (negotiated_.tls_v1) {
        phase_ = Phase::upgrading_tls;
        return handler_.on_start_tls();
      }
      return after_tls();
    }
    case Phase::awaiting_tls_ok:
      if (!is_ok(body))
        return fail(
            make_error_code(polybus::errc::protocol_error),
            "expected OK after the TLS upgrade, got '" + std::string(body.substr(0, 64)) + "'");
      return after_tls();
    case Phase::awaiting_compression_ok:
      if (!is_ok(body))
        return fail(make_error_code(polybus::errc::protocol_error),
                    "expected OK after switching compression, got '" +
                        std::string(body.substr(0, 64)) + "'");
      return after_compression();
    case Phase::authenticating: {
      AuthResponse auth;
      if (auto ec = parse_auth_response(body, auth))
        return fail(ec, "bad AUTH response: " + ec.message());
      phase_ = Phase::ready;
      return handler_.on_ready(negotiated_);
    }
    default:
      return fail(
          make_error_code(polybus::errc::protocol_error),
          "unexpected response '" + std::string(body.substr(0, 64)) + "' during the handshake");
  }
}

void Machine::tls_established() {
  if (phase_ == Phase::upgrading_tls) phase_ = Phase::awaiting_tls_ok;
}

void Machine::after_tls() {
  if (negotiated_.snappy || negotiated_.deflate) {
    codec_ = negotiated_.snappy
                 ? make_snappy_codec(config_.max_decoded_per_read)
                 : make_deflate_codec(negotiated_.deflate_level > 0 ? negotiated_.deflate_level : 6,
                                      config_.max_decoded_per_read);
    codec_pending_ = true;
    phase_ = Phase::awaiting_compression_ok;
    return;
  }
  after_compression();
}

void Machine::after_compression() {
  if (negotiated_.auth_required) {
    if (config_.auth_secret.empty())
      return fail(make_error_code(errc::e_auth_first),
                  "nsqd requires AUTH but no auth_secret is set");
    std::string out;
    if (auto ec = append_auth(out, config_.auth_secret)) return fail(ec, "cannot encode AUTH");
    phase_ = Phase::authenticating;
    return emit(std::move(out));
  }
  phase_ = Phase::ready;
  handler_.on_ready(negotiated_);
}

std::error_code Machine::subscribe(std::string_view topic, std::string_view channel) {
  std::string out;
  if (auto ec = append_sub(out, topic, channel)) return ec;
  emit(std::move(out));
  return {};
}

void Machine::ready_count(std::uint32_t count) {
  scratch_.clear();
  append_rdy(scratch_, count);
  emit_scratch();
}

std::error_code Machine::finish(std::string_view id) {
  scratch_.clear();
  if (auto ec = append_fin(scratch_, id)) return ec;
  emit_scratch();
  return {};
}

std::error_code Machine::requeue(std::string_view id, std::uint32_t delay_ms) {
  scratch_.clear();
  if (auto ec = append_req(scratch_, id, delay_ms)) return ec;
  emit_scratch();
  return {};
}

std::error_code Machine::touch(std::string_view id) {
  scratch_.clear();
  if (auto ec = append_touch(scratch_, id)) return ec;
  emit_scratch();
  return {};
}

void Machine::close_wait() {
  std::string out;
  append_cls(out);
  emit(std::move(out));
}

std::error_code Machine::publish(std::string_view topic, const Body& body, std::uint32_t defer_ms) {
  if (body.empty()) return make_error_code(errc::empty_body);
  scratch_.clear();
  auto ec = defer_ms ? append_dpub_header(scratch_, topic, defer_ms, body.size())
                     : append_pub_header(scratch_, topic, body.size());
  if (ec) return ec;
  if (codec_) {
    scratch_ += body.view();
    emit_scratch();
  } else {
    handler_.send_copy(scratch_);
    send_body(body);
  }
  return {};
}

std::error_code Machine::publish_batch(std::string_view topic, const std::vector<Body>& bodies) {
  views_.clear();
  for (const auto& body : bodies) views_.push_back(body.view());
  scratch_.clear();
  auto ec = append_mpub_header(scratch_, topic, views_);
  views_.clear();  // they point into the caller's bodies
  // A batch far larger than a gathered burst gives back what its views took.
  if (views_.capacity() > kViewsKeptAtMost) std::vector<std::string_view>().swap(views_);
  if (ec) return ec;
  if (codec_) {
    for (const auto& body : bodies) {
      append_size_prefix(scratch_, static_cast<std::uint32_t>(body.size()));
      scratch_ += body.view();
    }
    emit_scratch();
    return {};
  }
  handler_.send_copy(scratch_);
  for (const auto& body : bodies) {
    scratch_.clear();
    append_size_prefix(scratch_, static_cast<std::uint32_t>(body.size()));
    handler_.send_copy(scratch_);
    send_body(body);
  }
  return {};
}

void Machine::send_body(const Body& body) {
  if (body.shared())
    handler_.send(body.shared());  // gather-written: the payload is not copied
  else
    handler_.send_copy(body.view());
}

}  // namespace polybus::nsq
