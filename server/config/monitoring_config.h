// --monitoring_config_file (MonitoringConfig text format): whether Prometheus metrics are served
// on the REST port, and on which path (TF Serving's default "/monitoring/prometheus/metrics").
#pragma once

#include <string>

#include "common/status.h"

namespace mf::server {

struct MonitoringOptions {
  bool prometheus_enabled = false;
  std::string prometheus_path = "/monitoring/prometheus/metrics";
};

StatusOr<MonitoringOptions> LoadMonitoringConfigFile(const std::string& path);

}  // namespace mf::server
