// SPDX-License-Identifier: Apache-2.0
// Figg's error category: the codec's codes, their words, and the portable condition each maps to.
#include "polybus/figg/codec.hpp"

#include "polybus/error.hpp"

#include <string>

namespace polybus::figg {
namespace {

class Category final : public std::error_category {
 public:
  std::error_condition default_error_condition(int value) const noexcept override {
    switch (static_cast<errc>(value)) {
      case errc::frame_too_large:
        return make_error_condition(polybus::errc::frame_too_large);
      case errc::invalid_topic:
        return make_error_condition(polybus::errc::invalid_argument);
      default:
        return make_error_condition(polybus::errc::protocol_error);
    }
  }
  const char* name() const noexcept override { return "figg"; }
  std::string message(int value) const override {
    switch (static_cast<errc>(value)) {
      case errc::frame_too_large:
        return "figg frame payload larger than the configured maximum";
      case errc::truncated_field:
        return "figg field runs past the end of its message";
      case errc::trailing_bytes:
        return "figg message has bytes after its last field";
      case errc::unknown_type:
        return "figg message of an unknown type";
      case errc::invalid_topic:
        return "figg topic is empty or too long";
    }
    return "figg error " + std::to_string(value);
  }
};

}  // namespace

const std::error_category& figg_category() noexcept {
  static const Category category;
  return category;
}
std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), figg_category()};
}

}  // namespace polybus::figg
