#include "server/router/report_pusher.h"

#include <cmath>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>

#include "common/logging.h"
#include "http/client.h"
#include "metrics/metrics.h"

namespace mf::router {
namespace {

using Json = nlohmann::json;

std::string Label(const prometheus::ClientMetric& m, const std::string& name) {
  for (const auto& l : m.label) {
    if (l.name == name) return l.value;
  }
  return "";
}

bool IsError(const std::string& code) {
  static const std::set<std::string> kGrpcServerErrors = {"UNKNOWN",           "INTERNAL",  "UNAVAILABLE",
                                                          "DEADLINE_EXCEEDED", "DATA_LOSS", "UNIMPLEMENTED"};
  return (!code.empty() && code[0] == '5') || kGrpcServerErrors.count(code);
}

}  // namespace

Json BuildReport(const std::vector<prometheus::MetricFamily>& families, const std::string& modeldeployment,
                 const std::string& router) {
  Json versions = Json::object();
  std::map<std::string, std::map<double, double>> buckets;  // version -> upper bound -> cumulative count
  auto entry = [&](const std::string& version) -> Json& {
    Json& v = versions[version];
    if (v.is_null())
      v = {{"requests", 0.0}, {"errors", 0.0}, {"inFlight", 0.0}, {"mirrored", 0.0}, {"disagreements", 0.0}};
    return v;
  };
  for (const auto& family : families) {
    for (const auto& m : family.metric) {
      const std::string version = Label(m, "version");
      if (version.empty() || version == "none") continue;
      if (family.name == "modelfleet_router_requests_total") {
        Json& v = entry(version);
        v["requests"] = v["requests"].get<double>() + m.counter.value;
        if (IsError(Label(m, "code"))) v["errors"] = v["errors"].get<double>() + m.counter.value;
      } else if (family.name == "modelfleet_router_in_flight") {
        Json& v = entry(version);
        v["inFlight"] = v["inFlight"].get<double>() + m.gauge.value;
      } else if (family.name == "modelfleet_router_mirrored_total") {
        entry(version)["mirrored"] = m.counter.value;
      } else if (family.name == "modelfleet_router_mirror_disagreements_total") {
        entry(version)["disagreements"] = m.counter.value;
      } else if (family.name == "modelfleet_router_request_duration_seconds") {
        entry(version);
        for (const auto& b : m.histogram.bucket) {
          buckets[version][b.upper_bound] += static_cast<double>(b.cumulative_count);
        }
      }
    }
  }
  for (const auto& [version, bounds] : buckets) {
    Json list = Json::array();
    for (const auto& [bound, count] : bounds) {
      list.push_back(Json::array({std::isinf(bound) ? Json("+Inf") : Json(bound), count}));
    }
    versions[version]["latencyBuckets"] = list;
  }
  return {{"modeldeployment", modeldeployment}, {"router", router}, {"versions", versions}};
}

ReportPusher::ReportPusher(std::string url, std::string modeldeployment, std::string router,
                           std::chrono::milliseconds interval)
    : url_(std::move(url)),
      modeldeployment_(std::move(modeldeployment)),
      router_(std::move(router)),
      interval_(interval),
      thread_([this](std::stop_token stop) { Run(stop); }) {}

ReportPusher::~ReportPusher() {
  thread_.request_stop();
  if (thread_.joinable()) thread_.join();
}

void ReportPusher::Run(std::stop_token stop) {
  http::Client client({.connect_timeout = std::chrono::milliseconds(500), .read_timeout = std::chrono::seconds(2)});
  std::mutex mu;
  std::condition_variable_any cv;
  bool warned = false;
  while (!stop.stop_requested()) {
    const std::string body = BuildReport(metrics::DefaultRegistry()->Collect(), modeldeployment_, router_).dump();
    auto response = client.Post(url_, body, "application/json");
    const bool ok = response.ok() && response->status / 100 == 2;
    if (!ok && !warned) {
      log::Warning(
          "cannot push counters to the operator (will keep trying)",
          {{"url", url_},
           {"error", response.ok() ? "HTTP " + std::to_string(response->status) : response.status().message()}});
    } else if (ok && warned) {
      log::Info("pushing counters to the operator again", {{"url", url_}});
    }
    warned = !ok;
    std::unique_lock lock(mu);
    cv.wait_for(lock, stop, interval_, [] { return false; });
  }
}

}  // namespace mf::router
