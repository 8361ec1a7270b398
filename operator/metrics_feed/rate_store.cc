#include "metrics_feed/rate_store.h"

#include <algorithm>
#include <cmath>

namespace mf::op {
namespace {

bool NonNegative(const Json& v) { return v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() >= 0; }

// histogram_quantile over bucket deltas (Prometheus' linear interpolation within a bucket).
double Quantile(double q, const std::vector<std::pair<double, double>>& buckets) {
  if (buckets.empty() || buckets.back().second <= 0) return 0;
  const double rank = q * buckets.back().second;
  double prev_bound = 0, prev_count = 0;
  for (const auto& [bound, count] : buckets) {
    if (count >= rank) {
      if (std::isinf(bound)) return prev_bound;  // beyond the last finite bucket
      const double in_bucket = count - prev_count;
      return in_bucket <= 0 ? bound : prev_bound + (bound - prev_bound) * (rank - prev_count) / in_bucket;
    }
    prev_bound = bound;
    prev_count = count;
  }
  return prev_bound;
}

}  // namespace

StatusOr<RouterReport> ParseRouterReport(const std::string& body) {
  const Json j = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return InvalidArgument("a router report must be a JSON object");
  RouterReport r;
  if (!j.contains("modeldeployment") || !j["modeldeployment"].is_string() || !j.contains("router") ||
      !j["router"].is_string()) {
    return InvalidArgument("a router report needs the strings modeldeployment (namespace/name) and router");
  }
  r.modeldeployment = j["modeldeployment"];
  r.router = j["router"];
  if (r.modeldeployment.find('/') == std::string::npos || r.modeldeployment.size() > 320 || r.router.empty() ||
      r.router.size() > 253) {
    return InvalidArgument("modeldeployment must be namespace/name and router a pod name");
  }
  if (!j.contains("versions") || !j["versions"].is_object() || j["versions"].size() > 64) {
    return InvalidArgument("versions must map at most 64 version names to counters");
  }
  for (const auto& [name, v] : j["versions"].items()) {
    if (!v.is_object()) return InvalidArgument("versions." + name + " must be an object");
    VersionCounters c;
    for (auto [key, field] : {std::pair{"requests", &c.requests},
                              {"errors", &c.errors},
                              {"inFlight", &c.in_flight},
                              {"mirrored", &c.mirrored},
                              {"disagreements", &c.disagreements}}) {
      if (!v.contains(key)) continue;
      if (!NonNegative(v[key])) return InvalidArgument("versions." + name + "." + key + " must be a number >= 0");
      *field = v[key].get<double>();
    }
    if (v.contains("latencyBuckets")) {
      const Json& b = v["latencyBuckets"];
      if (!b.is_array() || b.size() > 128)
        return InvalidArgument("versions." + name + ".latencyBuckets must be a list");
      double last_bound = -1, last_count = 0;
      for (const auto& pair : b) {
        if (!pair.is_array() || pair.size() != 2 || !NonNegative(pair[1]) ||
            !(NonNegative(pair[0]) || (pair[0].is_string() && pair[0] == "+Inf"))) {
          return InvalidArgument("versions." + name +
                                 ".latencyBuckets holds [upper bound seconds or \"+Inf\", count] pairs");
        }
        const double bound = pair[0].is_string() ? INFINITY : pair[0].get<double>();
        const double count = pair[1].get<double>();
        if (bound <= last_bound || count < last_count) {
          return InvalidArgument("versions." + name + ".latencyBuckets must be cumulative with rising bounds");
        }
        c.latency_buckets.push_back({bound, count});
        last_bound = bound;
        last_count = count;
      }
    }
    r.versions[name] = std::move(c);
  }
  return r;
}

void RateStore::Add(RouterReport report, int64_t now_ms) {
  std::lock_guard lock(mu_);
  auto& series = samples_[report.modeldeployment][report.router];
  if (!series.empty()) {
    // A counter that went down: the router restarted; its old samples say nothing about the new run.
    for (const auto& [name, c] : report.versions) {
      auto it = series.back().versions.find(name);
      if (it != series.back().versions.end() && c.requests < it->second.requests) {
        series.clear();
        break;
      }
    }
  }
  series.push_back({now_ms, std::move(report.versions)});
  while (!series.empty() && series.front().at_ms < now_ms - keep_ms_) series.pop_front();
}

void RateStore::Forget(const std::string& modeldeployment) {
  std::lock_guard lock(mu_);
  samples_.erase(modeldeployment);
}

std::optional<std::map<std::string, VersionRates>> RateStore::Rates(const std::string& modeldeployment,
                                                                    int64_t window_ms, int64_t now_ms) const {
  std::lock_guard lock(mu_);
  auto md = samples_.find(modeldeployment);
  if (md == samples_.end()) return std::nullopt;
  std::map<std::string, VersionRates> out;
  std::map<std::string, std::vector<std::pair<double, double>>> bucket_deltas;
  bool any = false;
  for (const auto& [router, series] : md->second) {
    if (series.empty() || series.back().at_ms < now_ms - stale_ms_) continue;
    any = true;
    const Sample& last = series.back();
    // The oldest sample inside the window (or the newest before it).
    const Sample* first = &series.front();
    for (const auto& s : series) {
      if (s.at_ms > now_ms - window_ms) break;
      first = &s;
    }
    const double seconds = (last.at_ms - first->at_ms) / 1000.0;
    for (const auto& [name, c] : last.versions) {
      VersionRates& r = out[name];
      r.in_flight += c.in_flight;
      auto before = first->versions.find(name);
      const VersionCounters zero;
      const VersionCounters& b = (before == first->versions.end() || first == &last) ? zero : before->second;
      if (first == &last) continue;  // one sample: no rate yet
      const double dr = c.requests - b.requests;
      if (seconds > 0) r.qps += dr / seconds;
      r.requests += static_cast<int64_t>(dr);
      r.errors += static_cast<int64_t>(c.errors - b.errors);
      r.mirrored += static_cast<int64_t>(c.mirrored - b.mirrored);
      r.disagreements += static_cast<int64_t>(c.disagreements - b.disagreements);
      auto& deltas = bucket_deltas[name];
      if (deltas.empty()) {
        for (const auto& [bound, count] : c.latency_buckets) deltas.push_back({bound, 0});
      }
      if (deltas.size() == c.latency_buckets.size()) {
        for (size_t i = 0; i < deltas.size(); ++i) {
          const double old_count = i < b.latency_buckets.size() ? b.latency_buckets[i].second : 0;
          deltas[i].second += c.latency_buckets[i].second - old_count;
        }
      }
    }
  }
  if (!any) return std::nullopt;
  for (auto& [name, r] : out) {
    auto it = bucket_deltas.find(name);
    if (it != bucket_deltas.end() && r.requests > 0) r.p99_ms = Quantile(0.99, it->second) * 1000;
  }
  return out;
}

}  // namespace mf::op
