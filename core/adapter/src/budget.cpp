// SPDX-License-Identifier: Apache-2.0
#include "polybus/adapter/budget.hpp"

#include "polybus/options.hpp"

namespace polybus {

Budget Budget::from_options(const ResolvedOptions& options) {
  Budget b;
  b.max_frame_size = static_cast<std::size_t>(options.get_int("max_frame_size"));
  b.max_write_buffer = static_cast<std::size_t>(options.get_int("max_write_buffer"));
  b.max_decoded_per_read = static_cast<std::size_t>(options.get_int("max_decoded_per_read"));
  b.frame_timeout = options.get_duration("frame_timeout");
  b.max_held_messages = static_cast<std::uint32_t>(options.get_int("max_held_messages"));
  b.max_held_bytes = static_cast<std::size_t>(options.get_int("max_held_bytes"));
  b.max_json_depth = static_cast<std::uint32_t>(options.get_int("max_json_depth"));
  b.max_redirects = static_cast<std::uint32_t>(options.get_int("max_redirects"));
  return b;
}

std::string frame_over_write_room(const Budget& budget, std::size_t frame_bytes) {
  const std::size_t half = budget.max_write_buffer / 2;
  if (frame_bytes <= half) return {};
  return "its frame would not fit the write queue: " +
         limit_exceeded_text("bytes", "max_write_buffer/2", half, frame_bytes);
}

std::string limit_exceeded_text(std::string_view what, std::string_view option, std::uint64_t limit,
                                std::uint64_t seen) {
  std::string text(what);
  text += ": ";
  text += std::to_string(seen);
  text += " exceeds ";
  text += option;
  text += '=';
  text += std::to_string(limit);
  return text;
}

}  // namespace polybus
