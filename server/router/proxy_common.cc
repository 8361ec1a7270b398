#include "server/router/proxy_common.h"

#include <algorithm>
#include <random>
#include <thread>

#include "common/logging.h"
#include "server/router/routing.h"

namespace mf::router {

uint64_t RandomBits() {
  thread_local uint64_t state = [] {
    std::random_device device;
    return (static_cast<uint64_t>(device()) << 32) ^ device() ^
           std::hash<std::thread::id>()(std::this_thread::get_id());
  }();
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

bool IsRetrySafe(std::string_view method, std::string_view path) {
  if (method == "GET" || method == "HEAD" || method == "OPTIONS" || method == "PUT" || method == "DELETE") {
    return true;
  }
  if (method != "POST") return false;
  auto ends_with = [&](std::string_view suffix) {
    return path.size() >= suffix.size() && path.substr(path.size() - suffix.size()) == suffix;
  };
  if (path.starts_with("/v1/models/")) return ends_with(":predict") || ends_with(":classify") || ends_with(":regress");
  if (path.starts_with("/v2/models/")) return ends_with("/infer");
  return false;
}

bool IsRetrySafeGrpc(std::string_view path) {
  return path.starts_with("/tensorflow.serving.PredictionService/") ||
         path.starts_with("/tensorflow.serving.ModelService/GetModelStatus") ||
         path.starts_with("/inference.GRPCInferenceService/") || path.starts_with("/grpc.health.v1.Health/Check");
}

namespace {

bool WasTried(std::span<const std::shared_ptr<Endpoint>> tried, const Endpoint* endpoint) {
  return std::any_of(tried.begin(), tried.end(), [endpoint](const auto& e) { return e.get() == endpoint; });
}

bool HasUntried(const std::vector<std::shared_ptr<Endpoint>>& endpoints,
                std::span<const std::shared_ptr<Endpoint>> tried) {
  return std::any_of(endpoints.begin(), endpoints.end(), [&](const auto& e) { return !WasTried(tried, e.get()); });
}

}  // namespace

std::shared_ptr<Endpoint> ChooseEndpoint(const std::vector<std::shared_ptr<Endpoint>>& endpoints,
                                         std::span<const std::shared_ptr<Endpoint>> tried, Clock::time_point now,
                                         int max_outstanding) {
  if (endpoints.empty()) return nullptr;
  std::vector<EndpointLoad> loads(endpoints.size());
  std::vector<bool> eligible(endpoints.size());
  bool any_eligible = false;
  for (size_t i = 0; i < endpoints.size(); ++i) {
    const int outstanding = endpoints[i]->outstanding();
    eligible[i] = !WasTried(tried, endpoints[i].get()) && (max_outstanding <= 0 || outstanding < max_outstanding);
    any_eligible |= eligible[i];
    loads[i] = {outstanding, eligible[i] && !endpoints[i]->Ejected(now)};
  }
  if (!any_eligible) return nullptr;
  int chosen = PickEndpoint(loads, RandomBits());
  if (chosen < 0) {  // every eligible endpoint is ejected: use them anyway
    for (size_t i = 0; i < endpoints.size(); ++i) loads[i].available = eligible[i];
    chosen = PickEndpoint(loads, RandomBits());
  }
  return chosen < 0 ? nullptr : endpoints[chosen];
}

std::string NoEndpointLeftMessage(const Snapshot& snapshot, int version, bool grpc, int max_outstanding) {
  const VersionTargets& v = snapshot.versions[version];
  const size_t ready = grpc ? v.grpc.size() : v.rest.size();
  return "all " + std::to_string(ready) + " ready endpoints of version " + v.name + " of model " +
         snapshot.config.model + " have " + std::to_string(max_outstanding) +
         " requests in flight (--max-requests-per-endpoint)";
}

int FallbackVersion(const Snapshot& snapshot, int failed_version, bool grpc,
                    std::span<const std::shared_ptr<Endpoint>> tried) {
  std::vector<int> weights, ready;
  for (size_t i = 0; i < snapshot.versions.size(); ++i) {
    const VersionTargets& v = snapshot.versions[i];
    const auto& endpoints = grpc ? v.grpc : v.rest;
    int untried = 0;
    for (const auto& e : endpoints) untried += WasTried(tried, e.get()) ? 0 : 1;
    weights.push_back(v.weight);
    ready.push_back(static_cast<int>(i) == failed_version ? 0 : untried);
  }
  // Versions without an untried endpoint count as not ready: their share goes to the others.
  return PickVersionByPoint(weights, ready, UnitInterval(RandomBits()), UnitInterval(RandomBits()));
}

std::string RetriedNote(size_t retries, const std::string& earlier_errors, std::chrono::milliseconds waited) {
  std::string note;
  if (retries > 0) {
    note = " (after " + (retries == 1 ? std::string("a retry") : std::to_string(retries) + " retries") + ": " +
           earlier_errors + ")";
  }
  if (waited.count() > 0) note += " (waited " + std::to_string(waited.count()) + " ms for another endpoint)";
  return note;
}

RetryPlan PlanRetry(RetryInputs inputs, std::shared_ptr<const Snapshot> latest, std::string_view failed_version,
                    bool grpc, std::span<const std::shared_ptr<Endpoint>> tried) {
  RetryPlan plan;
  if (!latest) return plan;
  const int same = latest->config.VersionIndex(failed_version);
  inputs.untried_in_version =
      same >= 0 && HasUntried(grpc ? latest->versions[same].grpc : latest->versions[same].rest, tried);
  const int fallback = inputs.untried_in_version ? -1 : FallbackVersion(*latest, same, grpc, tried);
  inputs.untried_elsewhere = fallback >= 0;
  plan.decision = DecideRetry(inputs);
  if (plan.decision == RetryDecision::kGiveUp || plan.decision == RetryDecision::kWaitForEndpoints) return plan;
  plan.version = plan.decision == RetryDecision::kSameVersion ? same : fallback;
  plan.snapshot = std::move(latest);
  return plan;
}

void MirrorPair::Offer(bool is_primary, int status, std::string body) {
  std::unique_lock lock(mu_);
  (is_primary ? primary_ : mirror_) = std::make_pair(status, std::move(body));
  if (!primary_ || !mirror_) return;
  lock.unlock();  // both are set now and never change again
  if (!agree_(primary_->first, primary_->second, mirror_->first, mirror_->second)) {
    metrics_->mirror_disagreements().Increment();
    log::Debug("mirror disagreed", {{"version", version_},
                                    {"primary_status", std::to_string(primary_->first)},
                                    {"mirror_status", std::to_string(mirror_->first)}});
  }
}

}  // namespace mf::router
