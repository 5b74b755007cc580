// SPDX-License-Identifier: Apache-2.0
#include "bench_report.hpp"
#include "bench/svg_text.hpp"
#include "polybus/text/text.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace polybus::cli {

namespace {

using bench::escape_xml;
using bench::short_number;
const auto& format = bench::format_number;

std::string with_spread(const Spread& s, const char* pattern) {
  return format(pattern, s.median) + " (" + format(pattern, s.low) + "-" + format(pattern, s.high) +
         ")";
}

double throughput(const BenchResult& r) {
  return r.msgs_per_sec;
}
double megabytes(const BenchResult& r) {
  return r.mb_per_sec;
}
double cpu_per_message(const BenchResult& r) {
  return r.cpu_us_per_msg;
}
double allocs_per_message(const BenchResult& r) {
  return r.allocs_per_msg;
}
double p50(const BenchResult& r) {
  return static_cast<double>(r.latency_at(50));
}
double p99(const BenchResult& r) {
  return static_cast<double>(r.latency_at(99));
}
double p999(const BenchResult& r) {
  return static_cast<double>(r.latency_at(99.9));
}

double median_latency_at(const ComparedUrl& url, double percentile) {
  std::vector<double> values;
  for (const auto& r : url.rounds)
    if (r.latency_samples) values.push_back(static_cast<double>(r.latency_at(percentile)));
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

std::uint64_t total_failures(const ComparedUrl& url) {
  std::uint64_t n = 0;
  for (const auto& r : url.rounds) n += r.failures + (r.timed_out ? 1 : 0);
  return n;
}

const char* completion_meaning(const ComparedUrl& url) {
  return !url.rounds.empty() && url.rounds.front().publish_confirmed ? "broker-confirmed"
                                                                     : "written";
}

}  // namespace

Spread spread_of(const std::vector<BenchResult>& rounds, double (*figure)(const BenchResult&)) {
  std::vector<double> values;
  for (const auto& r : rounds) values.push_back(figure(r));
  Spread s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  s.median = n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
  s.low = values.front();
  s.high = values.back();
  return s;
}

std::string comparison_table(const std::vector<ComparedUrl>& urls) {
  const std::vector<std::string> head = {
      "url",        "msgs/s",    "MB/s",      "p50 us",   "p99 us",        "p99.9 us", "cpu us/msg",
      "allocs/msg", "published", "delivered", "failures", "publish means", "broker"};
  std::vector<std::vector<std::string>> rows{head};
  for (const auto& url : urls) {
    std::uint64_t published = 0, delivered = 0;
    for (const auto& r : url.rounds) published += r.published, delivered += r.delivered;
    rows.push_back({url.label, with_spread(spread_of(url.rounds, throughput), "%.0f"),
                    with_spread(spread_of(url.rounds, megabytes), "%.2f"),
                    with_spread(spread_of(url.rounds, p50), "%.0f"),
                    with_spread(spread_of(url.rounds, p99), "%.0f"),
                    with_spread(spread_of(url.rounds, p999), "%.0f"),
                    with_spread(spread_of(url.rounds, cpu_per_message), "%.2f"),
                    with_spread(spread_of(url.rounds, allocs_per_message), "%.2f"),
                    std::to_string(published), std::to_string(delivered),
                    std::to_string(total_failures(url)), completion_meaning(url),
                    url.in_process ? "in-process test broker" : "external"});
  }
  std::vector<std::size_t> width(head.size(), 0);
  for (const auto& row : rows)
    for (std::size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  std::string out;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    for (std::size_t i = 0; i < rows[r].size(); ++i) {
      out += rows[r][i];
      if (i + 1 < rows[r].size()) out += std::string(width[i] - rows[r][i].size() + 2, ' ');
    }
    out += '\n';
    if (r == 0) {
      for (std::size_t i = 0; i < width.size(); ++i)
        out += std::string(width[i], '-') + (i + 1 < width.size() ? "  " : "");
      out += '\n';
    }
  }
  out +=
      "medians over the rounds, (lowest-highest); published and delivered: totals of all "
      "rounds; an in-process test broker runs in this process, so its cpu and allocations "
      "count in the figures\n";
  return out;
}

std::string comparison_json(const ComparedUrl& url) {
  auto field = [](const char* name, const Spread& s) {
    return std::string("\"") + name + "\":{\"median\":" + format("%.3f", s.median) +
           ",\"low\":" + format("%.3f", s.low) + ",\"high\":" + format("%.3f", s.high) + "}";
  };
  std::uint64_t published = 0, delivered = 0;
  for (const auto& r : url.rounds) published += r.published, delivered += r.delivered;
  return "{\"summary\":true,\"url\":" + text::json_quote(url.label) +
         ",\"rounds\":" + std::to_string(url.rounds.size()) + "," +
         field("msgs_per_sec", spread_of(url.rounds, throughput)) + "," +
         field("mb_per_sec", spread_of(url.rounds, megabytes)) + "," +
         field("p50_us", spread_of(url.rounds, p50)) + "," +
         field("p99_us", spread_of(url.rounds, p99)) + "," +
         field("p999_us", spread_of(url.rounds, p999)) + "," +
         field("cpu_us_per_msg", spread_of(url.rounds, cpu_per_message)) + "," +
         field("allocs_per_msg", spread_of(url.rounds, allocs_per_message)) +
         ",\"published\":" + std::to_string(published) +
         ",\"delivered\":" + std::to_string(delivered) +
         ",\"failures\":" + std::to_string(total_failures(url)) + ",\"publish_completion\":\"" +
         completion_meaning(url) + "\",\"in_process\":" + (url.in_process ? "true" : "false") + "}";
}

namespace {

// Where the comparison's two panels go: bars on the left, curves on the right, the legend below.
struct SvgLayout {
  double width = 960, height = 520;
  double top = 70, plot_height = 330, bar_left = 90, bar_width_total = 330;
  double curve_left = 560, curve_width = 360;
};

void throughput_bars(std::string& svg, const std::vector<ComparedUrl>& urls,
                     const SvgLayout& layout) {
  const double top = layout.top, plot_height = layout.plot_height,
               bottom = layout.top + layout.plot_height;
  auto add = [&svg](const std::string& s) { svg += s; };
  const double bar_left = layout.bar_left, bar_width_total = layout.bar_width_total;
  // Throughput bars: median, whiskers from the lowest to the highest round.
  double highest = 1;
  for (const auto& url : urls) highest = std::max(highest, spread_of(url.rounds, throughput).high);
  const double top_rate = bench::axis_top(highest);
  add("<g id=\"throughput\">\n");
  add("<text x=\"" + format("%.0f", bar_left + bar_width_total / 2) + "\" y=\"" +
      format("%.0f", top - 18) +
      "\" text-anchor=\"middle\" font-weight=\"bold\">Throughput (median of rounds, lowest to "
      "highest)</text>\n");
  for (int tick = 0; tick <= 4; ++tick) {
    const double value = top_rate * tick / 4, y = bottom - plot_height * tick / 4;
    add("<line x1=\"" + format("%.1f", bar_left) + "\" y1=\"" + format("%.1f", y) + "\" x2=\"" +
        format("%.1f", bar_left + bar_width_total) + "\" y2=\"" + format("%.1f", y) +
        "\" stroke=\"#ddd\"/>\n");
    add("<text x=\"" + format("%.1f", bar_left - 6) + "\" y=\"" + format("%.1f", y + 4) +
        "\" text-anchor=\"end\">" + short_number(value) + "</text>\n");
  }
  add("<text transform=\"translate(22," + format("%.1f", top + plot_height / 2) +
      ") rotate(-90)\" text-anchor=\"middle\">messages per second (msgs/s)</text>\n");
  const double slot = bar_width_total / std::max<std::size_t>(1, urls.size());
  for (std::size_t i = 0; i < urls.size(); ++i) {
    const auto s = spread_of(urls[i].rounds, throughput);
    const double x = bar_left + slot * i + slot * 0.2, w = slot * 0.6;
    const double y = bottom - plot_height * s.median / top_rate;
    const char* colour = bench::report_colour(i);
    add("<rect class=\"bar\" x=\"" + format("%.1f", x) + "\" y=\"" + format("%.1f", y) +
        "\" width=\"" + format("%.1f", w) + "\" height=\"" + format("%.1f", bottom - y) +
        "\" fill=\"" + colour + "\"><title>" + escape_xml(urls[i].label) + ": " +
        format("%.0f", s.median) + " msgs/s</title></rect>\n");
    const double cx = x + w / 2, ylow = bottom - plot_height * s.low / top_rate,
                 yhigh = bottom - plot_height * s.high / top_rate;
    add("<line class=\"whisker\" x1=\"" + format("%.1f", cx) + "\" y1=\"" + format("%.1f", ylow) +
        "\" x2=\"" + format("%.1f", cx) + "\" y2=\"" + format("%.1f", yhigh) +
        "\" stroke=\"black\" stroke-width=\"1.5\"/>\n");
    add("<text x=\"" + format("%.1f", cx) + "\" y=\"" + format("%.1f", std::min(y, yhigh) - 6) +
        "\" text-anchor=\"middle\">" + short_number(s.median) + "</text>\n");
  }
  add("<line x1=\"" + format("%.1f", bar_left) + "\" y1=\"" + format("%.1f", bottom) + "\" x2=\"" +
      format("%.1f", bar_left + bar_width_total) + "\" y2=\"" + format("%.1f", bottom) +
      "\" stroke=\"black\"/>\n");
  add("</g>\n");
}

void latency_curves(std::string& svg, const std::vector<ComparedUrl>& urls,
                    const SvgLayout& layout) {
  const double top = layout.top, plot_height = layout.plot_height,
               bottom = layout.top + layout.plot_height;
  auto add = [&svg](const std::string& s) { svg += s; };
  const double curve_left = layout.curve_left, curve_width = layout.curve_width;
  // Latency curves: percentile on a log scale of 1/(1-p), microseconds on a log scale.
  const std::vector<double> percentiles = {50, 90, 99, 99.9, 99.99, 100};
  auto x_of = [&](std::size_t index) {
    return curve_left + curve_width * static_cast<double>(index) / (percentiles.size() - 1);
  };
  double low_us = 1e18, high_us = 1;
  for (const auto& url : urls)
    for (double p : percentiles) {
      const double v = median_latency_at(url, p);
      if (v > 0) low_us = std::min(low_us, v), high_us = std::max(high_us, v);
    }
  if (low_us > high_us) low_us = 1;
  const double log_low = std::floor(std::log10(std::max(1.0, low_us)));
  const double log_high = std::max(log_low + 1, std::ceil(std::log10(high_us)));
  auto y_of = [&](double us) {
    const double l = std::log10(std::max(1.0, us));
    return bottom - plot_height * (l - log_low) / (log_high - log_low);
  };
  add("<g id=\"latency\">\n");
  add("<text x=\"" + format("%.0f", curve_left + curve_width / 2) + "\" y=\"" +
      format("%.0f", top - 18) +
      "\" text-anchor=\"middle\" font-weight=\"bold\">Latency by percentile (median of "
      "rounds)</text>\n");
  for (double l = log_low; l <= log_high; ++l) {
    const double y = y_of(std::pow(10, l));
    add("<line x1=\"" + format("%.1f", curve_left) + "\" y1=\"" + format("%.1f", y) + "\" x2=\"" +
        format("%.1f", curve_left + curve_width) + "\" y2=\"" + format("%.1f", y) +
        "\" stroke=\"#ddd\"/>\n");
    add("<text x=\"" + format("%.1f", curve_left - 6) + "\" y=\"" + format("%.1f", y + 4) +
        "\" text-anchor=\"end\">" + short_number(std::pow(10, l)) + "</text>\n");
  }
  for (std::size_t i = 0; i < percentiles.size(); ++i) {
    const std::string name = percentiles[i] == 100 ? "max" : format("p%g", percentiles[i]);
    add("<text x=\"" + format("%.1f", x_of(i)) + "\" y=\"" + format("%.1f", bottom + 18) +
        "\" text-anchor=\"middle\">" + name + "</text>\n");
  }
  add("<text transform=\"translate(" + format("%.1f", curve_left - 62) + "," +
      format("%.1f", top + plot_height / 2) +
      ") rotate(-90)\" text-anchor=\"middle\">latency (µs, log scale)</text>\n");
  add("<text x=\"" + format("%.0f", curve_left + curve_width / 2) + "\" y=\"" +
      format("%.0f", bottom + 38) + "\" text-anchor=\"middle\">percentile</text>\n");
  for (std::size_t u = 0; u < urls.size(); ++u) {
    std::string points;
    for (std::size_t i = 0; i < percentiles.size(); ++i) {
      const double v = median_latency_at(urls[u], percentiles[i]);
      if (v <= 0) continue;
      points += format("%.1f", x_of(i)) + "," + format("%.1f", y_of(v)) + " ";
    }
    if (points.empty()) continue;  // no latency measured (e.g. payloads bench did not write)
    add("<polyline class=\"curve\" fill=\"none\" stroke=\"" + std::string(bench::report_colour(u)) +
        "\" stroke-width=\"2.5\" points=\"" + points + "\"><title>" + escape_xml(urls[u].label) +
        "</title></polyline>\n");
  }
  add("<line x1=\"" + format("%.1f", curve_left) + "\" y1=\"" + format("%.1f", bottom) +
      "\" x2=\"" + format("%.1f", curve_left + curve_width) + "\" y2=\"" + format("%.1f", bottom) +
      "\" stroke=\"black\"/>\n");
  add("</g>\n");
}

void legend(std::string& svg, const std::vector<ComparedUrl>& urls, const SvgLayout& layout) {
  const double bottom = layout.top + layout.plot_height, bar_left = layout.bar_left;
  auto add = [&svg](const std::string& s) { svg += s; };
  // Legend: colour, URL, what a completed publish means there, and where the broker runs.
  add("<g id=\"legend\">\n");
  for (std::size_t i = 0; i < urls.size(); ++i) {
    const double y = bottom + 62 + 20 * static_cast<double>(i);
    add("<rect x=\"" + format("%.0f", bar_left) + "\" y=\"" + format("%.1f", y - 11) +
        "\" width=\"14\" height=\"14\" fill=\"" + bench::report_colour(i) + "\"/>\n");
    add("<text x=\"" + format("%.0f", bar_left + 22) + "\" y=\"" + format("%.1f", y) + "\">" +
        escape_xml(urls[i].label) + " (publish " + completion_meaning(urls[i]) + "; " +
        (urls[i].in_process ? "in-process test broker" : "external broker") + ")</text>\n");
  }
  add("</g>\n");
}

}  // namespace

std::string comparison_svg(const std::vector<ComparedUrl>& urls, const std::string& workload) {
  const SvgLayout layout;
  const double width = layout.width, height = layout.height,
               bottom = layout.top + layout.plot_height;
  std::string svg;
  auto add = [&svg](const std::string& s) { svg += s; };
  add("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + format("%.0f", width) +
      "\" height=\"" + format("%.0f", height) + "\" viewBox=\"0 0 " + format("%.0f", width) + " " +
      format("%.0f", height) + "\" font-family=\"sans-serif\" font-size=\"13\">\n");
  add("<rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
  add("<text x=\"" + format("%.0f", width / 2) +
      "\" y=\"24\" text-anchor=\"middle\" font-size=\"17\" font-weight=\"bold\">polybus bench: " +
      escape_xml(workload) + "</text>\n");
  throughput_bars(svg, urls, layout);
  latency_curves(svg, urls, layout);
  legend(svg, urls, layout);
  add("</svg>\n");
  // Room for the legend: grow the height when there are many URLs.
  const double needed = bottom + 62 + 20 * static_cast<double>(urls.size());
  if (needed > height) {
    const std::string old_height = "height=\"" + format("%.0f", height) + "\"";
    const std::string new_height = "height=\"" + format("%.0f", needed) + "\"";
    svg.replace(svg.find(old_height), old_height.size(), new_height);
    const std::string old_box = "0 0 " + format("%.0f", width) + " " + format("%.0f", height);
    svg.replace(svg.find(old_box), old_box.size(),
                "0 0 " + format("%.0f", width) + " " + format("%.0f", needed));
  }
  return svg;
}

std::string comparison_html(const std::vector<ComparedUrl>& urls, const std::string& workload) {
  return "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>polybus bench: " +
         escape_xml(workload) + "</title></head>\n<body>\n" + comparison_svg(urls, workload) +
         "<pre>" + escape_xml(comparison_table(urls)) + "</pre>\n</body></html>\n";
}

}  // namespace polybus::cli
