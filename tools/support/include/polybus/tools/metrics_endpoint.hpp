// SPDX-License-Identifier: Apache-2.0
// `--metrics HOST:PORT`: serves GET /metrics (the Prometheus text format) over HTTP/1.1 on its
// own thread, for as long as the command runs. Each scrape asks `render` for fresh text.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "polybus/client.hpp"
#include "polybus/metrics.hpp"

namespace polybus::cli {

class MetricsEndpoint {
 public:
  // Appends the exposition text of what is measured now (metrics::write_prometheus); called on
  // the endpoint's thread.
  using Render = std::function<void(std::string& body)>;
  // Listens at once (port 0: any free port) and prints "metrics: http://ADDRESS/metrics" on
  // standard error. Throws UsageError for a malformed address, std::runtime_error naming the
  // address for one it cannot listen on.
  MetricsEndpoint(const std::string& host_port, Render render);
  ~MetricsEndpoint();
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  std::string address() const;  // host:port, the port resolved

 private:
  struct Server;
  std::shared_ptr<Server> server_;
};

// The endpoint when the command was given --metrics, else none.
std::unique_ptr<MetricsEndpoint> metrics_endpoint_if_asked(const class Args& args,
                                                           MetricsEndpoint::Render render);
// The same for commands whose metrics are one client's.
std::unique_ptr<MetricsEndpoint> metrics_endpoint_if_asked(const class Args& args,
                                                           const Client& client);

}  // namespace polybus::cli
