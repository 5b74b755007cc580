// SPDX-License-Identifier: Apache-2.0
#include "polybus/nsq/error.hpp"

#include "polybus/error.hpp"

#include <string>

namespace polybus::nsq {
namespace {

class NsqCategory final : public std::error_category {
 public:
  // nsqd's refusals are the broker's; the rest is a malformed peer or a refused argument.
  std::error_condition default_error_condition(int value) const noexcept override {
    const auto e = static_cast<errc>(value);
    if (e == errc::frame_too_large || e == errc::body_too_large)
      return make_error_condition(polybus::errc::frame_too_large);
    if (e == errc::invalid_name || e == errc::invalid_message_id || e == errc::empty_body)
      return make_error_condition(polybus::errc::invalid_argument);
    if (e >= errc::e_invalid || e == errc::lookup_topic_not_found || e == errc::lookup_failed)
      return make_error_condition(polybus::errc::broker_error);
    return make_error_condition(polybus::errc::protocol_error);
  }
  const char* name() const noexcept override { return "nsq"; }

  std::string message(int value) const override {
    switch (static_cast<errc>(value)) {
      case errc::bad_frame_size:
        return "frame size field is negative or smaller than the 4-byte frame type";
      case errc::frame_too_large:
        return "frame size field is over the configured maximum";
      case errc::unknown_frame_type:
        return "unknown frame type (expected 0, 1 or 2)";
      case errc::truncated_message:
        return "message frame is shorter than the 26-byte message header";
      case errc::invalid_json:
        return "payload is not well-formed JSON";
      case errc::invalid_identify_response:
        return "IDENTIFY response has a field of the wrong type or out of range";
      case errc::invalid_auth_response:
        return "AUTH response has a field of the wrong type or out of range";
      case errc::invalid_lookup_response:
        return "nsqlookupd response lacks producers or has a malformed producer";
      case errc::lookup_topic_not_found:
        return "nsqlookupd does not know the topic";
      case errc::lookup_failed:
        return "nsqlookupd answered a status other than 200";
      case errc::invalid_name:
        return "topic or channel name is not 1-64 characters of [.a-zA-Z0-9_-] "
               "with an optional #ephemeral suffix";
      case errc::invalid_message_id:
        return "message id is not 16 printable ASCII bytes without spaces";
      case errc::body_too_large:
        return "body size does not fit the signed 32-bit size field";
      case errc::empty_body:
        return "nsqd rejects empty bodies and empty MPUB batches";
      case errc::e_invalid:
        return "nsqd E_INVALID: invalid command, argument or state";
      case errc::e_bad_body:
        return "nsqd E_BAD_BODY: malformed command body";
      case errc::e_bad_topic:
        return "nsqd E_BAD_TOPIC: invalid topic name";
      case errc::e_bad_channel:
        return "nsqd E_BAD_CHANNEL: invalid channel name";
      case errc::e_bad_message:
        return "nsqd E_BAD_MESSAGE: invalid or oversized message body";
      case errc::e_pub_failed:
        return "nsqd E_PUB_FAILED: PUB could not be stored";
      case errc::e_mpub_failed:
        return "nsqd E_MPUB_FAILED: MPUB could not be stored";
      case errc::e_dpub_failed:
        return "nsqd E_DPUB_FAILED: DPUB could not be stored";
      case errc::e_fin_failed:
        return "nsqd E_FIN_FAILED: message not in flight (timed out?)";
      case errc::e_req_failed:
        return "nsqd E_REQ_FAILED: message not in flight (timed out?)";
      case errc::e_touch_failed:
        return "nsqd E_TOUCH_FAILED: message not in flight (timed out?)";
      case errc::e_sub_failed:
        return "nsqd E_SUB_FAILED: subscription refused";
      case errc::e_identify_failed:
        return "nsqd E_IDENTIFY_FAILED: feature negotiation failed";
      case errc::e_auth_failed:
        return "nsqd E_AUTH_FAILED: authentication failed";
      case errc::e_auth_error:
        return "nsqd E_AUTH_ERROR: authentication error";
      case errc::e_auth_first:
        return "nsqd E_AUTH_FIRST: AUTH is required first";
      case errc::e_auth_disabled:
        return "nsqd E_AUTH_DISABLED: nsqd has authentication off";
      case errc::e_unauthorized:
        return "nsqd E_UNAUTHORIZED: not permitted on this topic/channel";
      case errc::unknown_server_error:
        return "nsqd sent an error code this client does not know";
    }
    return "unknown nsq error " + std::to_string(value);
  }
};

}  // namespace

const std::error_category& nsq_category() noexcept {
  static const NsqCategory category;
  return category;
}

std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), nsq_category()};
}

}  // namespace polybus::nsq
