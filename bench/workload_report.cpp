// SPDX-License-Identifier: Apache-2.0
#include "workload_report.hpp"

#include <algorithm>
#include <cmath>
#include <functional>

#include "polybus/text/text.hpp"
#include "svg_text.hpp"

namespace polybus::bench {
namespace {

std::string f(const char* pattern, double value) {
  return format_number(pattern, value);
}

// One panel: a line per result over the windows, y from 0 to a round number above the highest.
std::string panel(const std::vector<OmbResult>& results, const std::string& title,
                  const std::string& unit,
                  const std::function<const std::vector<double>(const OmbResult&)>& series,
                  double left, double top, double width, double height) {
  double highest = 0;
  std::size_t longest = 1;
  for (const auto& r : results) {
    const auto values = series(r);
    for (double v : values) highest = std::max(highest, v);
    longest = std::max(longest, values.size());
  }
  if (highest <= 0) highest = 1;
  const double top_value = axis_top(highest), bottom = top + height;
  std::string svg = "<g class=\"panel\">\n<text x=\"" + f("%.1f", left + width / 2) + "\" y=\"" +
                    f("%.1f", top - 12) + "\" text-anchor=\"middle\" font-weight=\"bold\">" +
                    escape_xml(title) + "</text>\n";
  for (int tick = 0; tick <= 4; ++tick) {
    const double y = bottom - height * tick / 4;
    svg += "<line x1=\"" + f("%.1f", left) + "\" y1=\"" + f("%.1f", y) + "\" x2=\"" +
           f("%.1f", left + width) + "\" y2=\"" + f("%.1f", y) + "\" stroke=\"#ddd\"/>\n";
    svg += "<text x=\"" + f("%.1f", left - 6) + "\" y=\"" + f("%.1f", y + 4) +
           "\" text-anchor=\"end\">" + short_number(top_value * tick / 4) + "</text>\n";
  }
  svg += "<text transform=\"translate(" + f("%.1f", left - 58) + "," + f("%.1f", top + height / 2) +
         ") rotate(-90)\" text-anchor=\"middle\">" + escape_xml(unit) + "</text>\n";
  const double window_seconds = results.empty() ? 10 : results.front().window_seconds;
  svg += "<text x=\"" + f("%.1f", left + width / 2) + "\" y=\"" + f("%.1f", bottom + 34) +
         "\" text-anchor=\"middle\">window (" + f("%g", window_seconds) + " s each)</text>\n";
  for (std::size_t i = 0; i < longest; i += std::max<std::size_t>(1, longest / 6)) {
    const double x = left + width * (longest == 1 ? 0.5 : static_cast<double>(i) / (longest - 1));
    svg += "<text x=\"" + f("%.1f", x) + "\" y=\"" + f("%.1f", bottom + 16) +
           "\" text-anchor=\"middle\">" + std::to_string(i + 1) + "</text>\n";
  }
  for (std::size_t u = 0; u < results.size(); ++u) {
    const auto values = series(results[u]);
    std::string points;
    for (std::size_t i = 0; i < values.size(); ++i) {
      const double x = left + width * (longest == 1 ? 0.5 : static_cast<double>(i) / (longest - 1));
      points += f("%.1f", x) + "," + f("%.1f", bottom - height * values[i] / top_value) + " ";
    }
    if (points.empty()) continue;
    svg += "<polyline class=\"series\" fill=\"none\" stroke=\"" + std::string(report_colour(u)) +
           "\" stroke-width=\"2\" points=\"" + points + "\"><title>" +
           escape_xml(results[u].driver) + "</title></polyline>\n";
  }
  svg += "<line x1=\"" + f("%.1f", left) + "\" y1=\"" + f("%.1f", bottom) + "\" x2=\"" +
         f("%.1f", left + width) + "\" y2=\"" + f("%.1f", bottom) + "\" stroke=\"black\"/>\n</g>\n";
  return svg;
}

std::vector<double> p99_of(const LatencySeries& s) {
  std::vector<double> out;
  for (const auto& w : s.windows) out.push_back(w.p99);
  return out;
}

}  // namespace

std::string summary_lines(const OmbResult& r) {
  const double windows = static_cast<double>(std::max<std::size_t>(1, r.publish_rate.size()));
  double publish = 0, consume = 0;
  for (double v : r.publish_rate) publish += v;
  for (double v : r.consume_rate) consume += v;
  std::string out =
      r.driver + " " + (r.complete ? "done" : "INCOMPLETE (" + r.incomplete_because + ")") + ": " +
      std::to_string(r.published) + " published, " + std::to_string(r.publish_errors) +
      " failed, " + std::to_string(r.received) + " received over " +
      std::to_string(r.publish_rate.size()) + " window(s); mean " + f("%.1f", publish / windows) +
      " msg/s published, " + f("%.1f", consume / windows) + " msg/s consumed\n";
  auto line = [&](const char* name, const LatencySummary& s, const char* unit) {
    out += r.driver + "   " + name + " (" + unit + "): avg " + f("%.3f", s.avg) + ", p50 " +
           f("%.3f", s.p50) + ", p75 " + f("%.3f", s.p75) + ", p95 " + f("%.3f", s.p95) + ", p99 " +
           f("%.3f", s.p99) + ", p99.9 " + f("%.3f", s.p999) + ", p99.99 " + f("%.3f", s.p9999) +
           ", max " + f("%.3f", s.max) + "\n";
  };
  if (r.backlog_bytes > 0) {
    auto took = [](double seconds) {
      return seconds < 0 ? std::string("not reached") : "in " + f("%.1f", seconds) + " s";
    };
    out += r.driver + "   backlog of " + std::to_string(r.backlog_messages) + " messages (" +
           std::to_string(r.backlog_bytes) + " bytes) built " + took(r.backlog_built_seconds) +
           ", drained " + took(r.backlog_drained_seconds) + "\n";
  }
  line("publish latency", r.aggregated_publish, "ms");
  line("publish delay", r.aggregated_delay, "us");
  line("end-to-end latency", r.aggregated_end_to_end, "ms");
  if (!r.first_error.empty()) out += r.driver + "   first failure: " + r.first_error + "\n";
  out += "{\"workload\":" + text::json_quote(r.workload) +
         ",\"driver\":" + text::json_quote(r.driver) +
         ",\"complete\":" + (r.complete ? "true" : "false") +
         ",\"published\":" + std::to_string(r.published) +
         ",\"publishErrors\":" + std::to_string(r.publish_errors) +
         ",\"received\":" + std::to_string(r.received) +
         ",\"windows\":" + std::to_string(r.publish_rate.size()) +
         ",\"publishRateAvg\":" + f("%.1f", publish / windows) +
         ",\"consumeRateAvg\":" + f("%.1f", consume / windows) +
         ",\"aggregatedPublishLatency99pct\":" + f("%.3f", r.aggregated_publish.p99) +
         ",\"aggregatedPublishDelayLatency99pct\":" + f("%.0f", r.aggregated_delay.p99) +
         ",\"aggregatedEndToEndLatency99pct\":" + f("%.3f", r.aggregated_end_to_end.p99) + "}\n";
  return out;
}

std::string workload_svg(const std::vector<OmbResult>& results) {
  const double width = 1000, panel_width = 360, panel_height = 220;
  const double legend_top = 2 * (panel_height + 110) + 40;
  const double height = legend_top + 20 * static_cast<double>(results.size()) + 20;
  const std::string title =
      "polybus bench --workload: " + (results.empty() ? std::string() : results.front().workload);
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + f("%.0f", width) +
                    "\" height=\"" + f("%.0f", height) + "\" viewBox=\"0 0 " + f("%.0f", width) +
                    " " + f("%.0f", height) +
                    "\" font-family=\"sans-serif\" font-size=\"13\">\n<rect x=\"0\" y=\"0\" "
                    "width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"" +
                    f("%.0f", width / 2) +
                    "\" y=\"24\" text-anchor=\"middle\" font-size=\"17\" font-weight=\"bold\">" +
                    escape_xml(title) + "</text>\n";
  const double left1 = 100, left2 = 600, top1 = 80, top2 = top1 + panel_height + 110;
  svg += panel(
      results, "Publish rate per window", "messages per second",
      [](const OmbResult& r) { return r.publish_rate; }, left1, top1, panel_width, panel_height);
  svg += panel(
      results, "Consume rate per window", "messages per second",
      [](const OmbResult& r) { return r.consume_rate; }, left2, top1, panel_width, panel_height);
  svg += panel(
      results, "Publish latency p99 per window", "milliseconds",
      [](const OmbResult& r) { return p99_of(r.publish_latency); }, left1, top2, panel_width,
      panel_height);
  svg += panel(
      results, "End-to-end latency p99 per window", "milliseconds",
      [](const OmbResult& r) { return p99_of(r.end_to_end); }, left2, top2, panel_width,
      panel_height);
  svg += "<g id=\"legend\">\n";
  for (std::size_t i = 0; i < results.size(); ++i) {
    const double y = legend_top + 20 * static_cast<double>(i);
    svg += "<rect x=\"" + f("%.0f", left1) + "\" y=\"" + f("%.1f", y - 11) +
           "\" width=\"14\" height=\"14\" fill=\"" + report_colour(i) + "\"/>\n<text x=\"" +
           f("%.0f", left1 + 22) + "\" y=\"" + f("%.1f", y) + "\">" +
           escape_xml(results[i].driver) + (results[i].complete ? "" : " (incomplete)") +
           "</text>\n";
  }
  return svg + "</g>\n</svg>\n";
}

std::string workload_html(const std::vector<OmbResult>& results) {
  std::string summaries;
  for (const auto& r : results) summaries += summary_lines(r);
  return "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>polybus bench "
         "--workload</title>"
         "</head>\n<body>\n" +
         workload_svg(results) + "<pre>" + escape_xml(summaries) + "</pre>\n</body></html>\n";
}

}  // namespace polybus::bench
