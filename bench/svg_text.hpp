// SPDX-License-Identifier: Apache-2.0
// What the bench's SVG reports share: their colours, numbers written short, XML-escaped text.
#pragma once

#include <cmath>
#include <cstdio>
#include <string>

namespace polybus::bench {

// One colour per URL, in order (matplotlib's first eight: told apart in print and on screen).
inline const char* report_colour(std::size_t index) {
  static const char* const kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                         "#9467bd", "#8c564b", "#e377c2", "#17becf"};
  return kColours[index % 8];
}

inline std::string format_number(const char* pattern, double value) {
  char text[64];
  std::snprintf(text, sizeof text, pattern, value);
  return text;
}

// 1234567 -> "1.23M", 45678 -> "45.7k".
inline std::string short_number(double value) {
  if (value >= 1e6) return format_number("%.3gM", value / 1e6);
  if (value >= 1e3) return format_number("%.3gk", value / 1e3);
  return format_number("%.3g", value);
}

// The top of an axis that four gridlines divide at a round step (1, 2, 2.5 or 5 times a power
// of ten), just above `highest` (which is above 0).
inline double axis_top(double highest) {
  const double magnitude = std::pow(10, std::floor(std::log10(highest * 1.05 / 4)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (magnitude * m * 4 >= highest * 1.05) return magnitude * m * 4;
  return magnitude * 40;
}

inline std::string escape_xml(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace polybus::bench
