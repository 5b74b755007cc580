// SPDX-License-Identifier: Apache-2.0
// MemoDB's error category: memo01's and SP's codes, their words, and the portable condition each
// maps to.
#include "polybus/memodb/codec.hpp"

#include "polybus/error.hpp"

#include <string>

namespace polybus::memodb {
namespace {

class Category final : public std::error_category {
 public:
  std::error_condition default_error_condition(int value) const noexcept override {
    if (static_cast<errc>(value) == errc::field_too_long ||
        static_cast<errc>(value) == errc::sp_message_too_large)
      return make_error_condition(polybus::errc::frame_too_large);
    return make_error_condition(polybus::errc::protocol_error);
  }
  const char* name() const noexcept override { return "memodb"; }
  std::string message(int value) const override {
    switch (static_cast<errc>(value)) {
      case errc::empty_message:
        return "memodb message is empty (no CBOR header)";
      case errc::truncated:
        return "memodb header ends before its last field";
      case errc::malformed_cbor:
        return "memodb header is not well-formed CBOR";
      case errc::indefinite_length:
        return "memodb header uses an indefinite-length item";
      case errc::wrong_type:
        return "memodb header field has the wrong CBOR type";
      case errc::nesting:
        return "memodb header has an array or map where a scalar field belongs";
      case errc::wrong_version:
        return "memodb header's version is not \"memo01\"";
      case errc::unknown_type:
        return "memodb message type is not 1 to 5";
      case errc::wrong_field_count:
        return "memodb header has the wrong number of fields for its type";
      case errc::field_too_long:
        return "memodb ID, service name or service list is over its limit";
      case errc::invalid_service:
        return "memodb service name is empty or not valid UTF-8";
      case errc::unsorted_services:
        return "memodb READY service names repeat or are not sorted by length then bytewise";
      case errc::sp_bad_header:
        return "SP connection header is not SP or names another protocol than req0/rep0";
      case errc::sp_bad_frame:
        return "SP IPC message type is not 1";
      case errc::sp_message_too_large:
        return "SP message is over its size limit";
      case errc::sp_no_backtrace:
        return "SP request or reply has no request ID";
    }
    return "memodb error " + std::to_string(value);
  }
};

}  // namespace

const std::error_category& memodb_category() noexcept {
  static const Category category;
  return category;
}

std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), memodb_category()};
}

}  // namespace polybus::memodb
