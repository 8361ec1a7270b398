// spec.autoscaling.prometheus as a QPS source: the query the operator sends to Prometheus' HTTP
// API for one version, and the number it reads from the answer. The call itself is the
// controller's (options.prometheus_query); this part is pure and tested as tables.
//
// In the query, $namespace, $modeldeployment and $version stand for the ModelDeployment's
// namespace and name and the version being scaled, so one query serves every version, as
//   sum(rate(modelfleet_router_requests_total{namespace="$namespace",
//       modeldeployment="$modeldeployment", version="$version"}[1m]))
// A query without $version gives every version the same load (e.g. a queue length).
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace mf::op {

std::string ExpandPrometheusQuery(std::string_view query, std::string_view ns, std::string_view name,
                                  std::string_view version);

// The request target of an instant query (GET /api/v1/query?query=...) under `base_url`
// ("http://prometheus.monitoring.svc:9090", a path prefix kept), the query percent-encoded.
std::string PrometheusQueryUrl(std::string_view base_url, std::string_view query);

// The value of a /api/v1/query answer: a scalar, or the sum of an instant vector (an empty vector
// is 0: no series yet means no traffic). INVALID_ARGUMENT for an error answer (with Prometheus'
// own errorType and error), another result type, or a value that is not a finite number >= 0.
StatusOr<double> ParsePrometheusValue(std::string_view body);

// The same for an HTTP answer: Prometheus answers a bad query with 400 or 422 and its error in
// the JSON body, which is what the message says; another non-200 answer is "HTTP <status>: ...".
StatusOr<double> ParsePrometheusAnswer(int http_status, std::string_view body);

}  // namespace mf::op
