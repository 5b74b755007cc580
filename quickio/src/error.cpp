// SPDX-License-Identifier: Apache-2.0
#include <string>

#include "polybus/error.hpp"

#include "polybus/quickio/codec.hpp"

namespace polybus::quickio {
namespace {

class Category final : public std::error_category {
 public:
  std::error_condition default_error_condition(int value) const noexcept override {
    if (static_cast<codec_errc>(value) == codec_errc::frame_too_large)
      return make_error_condition(polybus::errc::frame_too_large);
    return make_error_condition(polybus::errc::protocol_error);
  }
  const char* name() const noexcept override { return "quickio"; }
  std::string message(int value) const override {
    switch (static_cast<codec_errc>(value)) {
      case codec_errc::malformed_event:
        return "quickio event is not <path>:<callback id>=<json>";
      case codec_errc::invalid_path:
        return "quickio event path is empty or has a bad character";
      case codec_errc::invalid_callback_id:
        return "quickio callback id is not a decimal uint64";
      case codec_errc::invalid_json:
        return "quickio event data is not well-formed JSON";
      case codec_errc::frame_too_large:
        return "quickio frame larger than the configured maximum";
      case codec_errc::malformed_frame:
        return "quickio frame cannot be decoded";
      case codec_errc::invalid_utf8:
        return "quickio text is not valid UTF-8";
      case codec_errc::malformed_callback_body:
        return "quickio callback body is not {\"code\":N,\"data\":X}";
    }
    return "quickio error " + std::to_string(value);
  }
};

}  // namespace

const std::error_category& codec_category() noexcept {
  static const Category category;
  return category;
}

std::error_code make_error_code(codec_errc e) noexcept {
  return {static_cast<int>(e), codec_category()};
}

}  // namespace polybus::quickio
