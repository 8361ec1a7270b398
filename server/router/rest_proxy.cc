#include "server/router/rest_proxy.h"

#include <array>
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "common/coarse_clock.h"
#include "common/logging.h"
#include "server/router/mirror_compare.h"
#include "server/router/proxy_common.h"
#include "server/router/routing.h"

namespace mf::router {
namespace {

// Hop-by-hop fields (RFC 9110 7.6.1) and those the server and the upstream client frame
// themselves: never forwarded in either direction.
bool IsHopByHop(std::string_view name) {
  static constexpr std::array<std::string_view, 10> kNames = {
      "connection", "keep-alive",     "proxy-connection", "transfer-encoding", "te", "trailer",
      "upgrade",    "content-length", "expect",           "proxy-authenticate"};
  // Every field of every request and response passes here: a bit per name length rules most
  // out before any comparison.
  static constexpr uint32_t kLengths = [] {
    uint32_t bits = 0;
    for (std::string_view n : kNames) bits |= uint32_t{1} << n.size();
    return bits;
  }();
  if (name.size() >= 32 || (kLengths & (uint32_t{1} << name.size())) == 0) return false;
  for (std::string_view n : kNames) {
    if (http::EqualsIgnoreCase(name, n)) return true;
  }
  return false;
}

// Headers named in a Connection field are hop-by-hop too.
bool NamedByConnection(const http::Headers& headers, std::string_view name) {
  for (const auto& [field, value] : headers.fields()) {
    if (!http::EqualsIgnoreCase(field, "connection")) continue;
    std::string_view list = value;
    while (!list.empty()) {
      size_t comma = list.find(',');
      std::string_view token = list.substr(0, comma);
      while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
      while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
      if (http::EqualsIgnoreCase(token, name)) return true;
      list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    }
  }
  return false;
}

// Drops the hop-by-hop fields of an upstream response in place (the server frames the answer
// to the client itself).
void RemoveHopByHop(http::Headers& headers) {
  if (headers.Has("connection")) {
    // The Connection field lists more names: decide on a copy, since it goes too.
    const http::Headers original = headers;
    headers.RemoveIf([&](std::string_view name) { return IsHopByHop(name) || NamedByConnection(original, name); });
    return;
  }
  headers.RemoveIf(IsHopByHop);
}

http::Response JsonError(int status, const std::string& message) {
  return http::Response::Json(status, nlohmann::json{{"error", message}}.dump() + "\n");
}

// One proxied request, from routing to its answer; owned by the pending upstream callback.
class ProxyCall : public std::enable_shared_from_this<ProxyCall> {
 public:
  ProxyCall(const SnapshotStore& snapshots, std::shared_ptr<const Snapshot> snapshot, HttpUpstream& upstream,
            const ProxyOptions& options, http::Responder responder, Clock::time_point start)
      : snapshots_(snapshots),
        snapshot_(std::move(snapshot)),
        upstream_(upstream),
        options_(options),
        responder_(std::move(responder)),
        start_(start),
        deadline_(start + options.upstream_timeout) {}

  void Run(const http::Request& request) {
    const RouterConfig& config = snapshot_->config;
    const http::Headers& headers = request.headers;
    HeaderLookup lookup = [&headers](std::string_view name) { return headers.Get(name); };
    VersionPick pick = PickVersion(config, snapshot_->rest_ready, lookup, RandomBits(), RandomBits());
    if (pick.version < 0) {
      if (pick.reason == PickReason::kRoute) {
        for (const HeaderRoute& route : config.routes) {
          auto value = headers.Get(route.header);
          if (!value || *value != route.value) continue;
          int v = config.VersionIndex(route.version);
          version_ = v;
          return Answer(JsonError(503, "no ready endpoint for version " + route.version + " of model " + config.model +
                                           ", which the route " + route.header + ": " + route.value + " selects (" +
                                           std::to_string(snapshot_->rest_ready[v]) + "/" +
                                           std::to_string(snapshot_->rest_total[v]) + " ready)"));
        }
      }
      return Answer(JsonError(503, NoReadyEndpointMessage(config, snapshot_->rest_ready, snapshot_->rest_total)));
    }
    version_ = pick.version;

    // Views into the request and the strings below: nothing is copied until the wire format.
    std::vector<HeaderView> forwarded;
    forwarded.reserve(headers.fields().size() + 3);
    const bool connection_lists_fields = headers.Has("connection");
    for (const auto& [name, value] : headers.fields()) {
      if (IsHopByHop(name) || (connection_lists_fields && NamedByConnection(headers, name)) ||
          http::EqualsIgnoreCase(name, "x-request-id") || http::EqualsIgnoreCase(name, "x-forwarded-for")) {
        continue;
      }
      forwarded.emplace_back(name, value);
    }
    if (!headers.Has("host")) forwarded.emplace_back("host", "modelfleet-router");
    forwarded.emplace_back("x-request-id", request.request_id);
    const std::string_view client_ip =
        std::string_view(request.remote_address).substr(0, request.remote_address.rfind(':'));
    std::string forwarded_for;
    if (auto previous = headers.Get("x-forwarded-for")) {
      forwarded_for.append(*previous).append(", ").append(client_ip);
    } else {
      forwarded_for.assign(client_ip);
    }
    forwarded.emplace_back("x-forwarded-for", forwarded_for);
    auto made = MakeUpstreamRequest(request.method, request.target, forwarded, request.body,
                                    IsRetrySafe(request.method, request.path()));
    if (!made.ok()) return Answer(JsonError(400, made.status().message()));
    upstream_request_ = *made;

    StartMirror();
    routed_metrics_ = snapshot_->versions[version_].metrics;
    routed_metrics_->in_flight().Increment();
    Attempt();
  }

  void Answer(http::Response response) {
    VersionMetrics* m = version_ >= 0 ? snapshot_->versions[version_].metrics : snapshot_->unrouted_metrics;
    if (m)
      m->RecordRequest(Protocol::kRest, response.status, std::chrono::duration<double>(Clock::now() - start_).count());
    if (routed_metrics_) routed_metrics_->in_flight().Decrement();
    if (version_ >= 0) response.headers.Set("x-modelfleet-version", snapshot_->versions[version_].name);
    if (mirror_) mirror_->Offer(true, response.status, response.body);
    responder_.Respond(std::move(response));
  }

 private:
  // Sends the request to an untried endpoint of version_ of snapshot_.
  void Attempt() {
    std::shared_ptr<Endpoint> endpoint =
        ChooseEndpoint(snapshot_->versions[version_].rest, tried_, CoarseNow(), options_.max_requests_per_endpoint);
    if (!endpoint) {
      return Answer(
          JsonError(503, NoEndpointLeftMessage(*snapshot_, version_, false, options_.max_requests_per_endpoint)));
    }
    tried_.push_back(endpoint);
    endpoint->Begin();
    upstream_.Send(endpoint, upstream_request_, deadline_,
                   // Only `self` (16 bytes) is captured, so std::function keeps the callback inline
                   // instead of allocating it: the endpoint is the last one tried.
                   [self = shared_from_this()](UpstreamResult result) {
                     std::shared_ptr<Endpoint> endpoint = self->tried_.back();
                     endpoint->End();
                     self->OnResult(endpoint, std::move(result));
                   });
  }

  static AttemptFailure FailureOf(UpstreamError error) {
    switch (error) {
      case UpstreamError::kConnect:
        return AttemptFailure::kNotDelivered;
      case UpstreamError::kNoResponse:
        return AttemptFailure::kNoResponse;
      case UpstreamError::kTimeout:
        return AttemptFailure::kTimeout;
      case UpstreamError::kNone:
      case UpstreamError::kBadResponse:
        break;
    }
    return AttemptFailure::kResponseStarted;
  }

  void OnResult(const std::shared_ptr<Endpoint>& endpoint, UpstreamResult result) {
    const bool failed = result.error != UpstreamError::kNone || result.response.status >= 500;
    if (failed) {
      if (endpoint->RecordFailure(Clock::now(), options_.outlier)) {
        snapshot_->versions[version_].metrics->ejections().Increment();
        log::Warning("endpoint ejected after consecutive failures",
                     {{"version", snapshot_->versions[version_].name},
                      {"endpoint", endpoint->address()},
                      {"seconds", std::to_string(options_.outlier.ejection.count() / 1000)}});
      }
    } else {
      endpoint->RecordSuccess();
    }
    if (result.error == UpstreamError::kNone) {
      http::Response response = std::move(result.response);
      RemoveHopByHop(response.headers);
      return Answer(std::move(response));
    }
    RetryOrFail(endpoint, std::make_shared<const UpstreamResult>(std::move(result)));
  }

  // After a failed attempt: the next attempt, a wait for the endpoint list to change, or the
  // failure as the answer.
  void RetryOrFail(const std::shared_ptr<Endpoint>& endpoint, std::shared_ptr<const UpstreamResult> result) {
    const AttemptFailure failure = FailureOf(result->error);
    const Clock::time_point now = Clock::now();
    RetryPlan plan = PlanRetry({.failure = failure,
                                .retry_safe = upstream_request_->retry_safe,
                                .attempts = static_cast<int>(tried_.size()),
                                .maybe_processed_retries = maybe_processed_retries_,
                                .deadline_passed = now >= deadline_,
                                .may_wait = waited_ < kMaxEndpointWait},
                               snapshots_.Load(), snapshot_->versions[version_].name, false, tried_);
    switch (plan.decision) {
      case RetryDecision::kGiveUp:
        return AnswerFailure(endpoint, *result);
      case RetryDecision::kWaitForEndpoints: {
        const auto step = std::min<Clock::duration>(kEndpointWaitStep, deadline_ - now);
        waited_ += kEndpointWaitStep;
        upstream_.After(step, [self = shared_from_this(), endpoint, result] { self->RetryOrFail(endpoint, result); });
        return;
      }
      case RetryDecision::kSameVersion:
      case RetryDecision::kOtherVersion:
        break;
    }
    log::Debug("retrying on another endpoint", {{"version", snapshot_->versions[version_].name},
                                                {"endpoint", endpoint->address()},
                                                {"error", result->message},
                                                {"next", std::string(RetryDecisionName(plan.decision))}});
    routed_metrics_->retries().Increment();
    if (failure == AttemptFailure::kNoResponse) ++maybe_processed_retries_;
    earlier_errors_ += (earlier_errors_.empty() ? "" : "; ") + result->message;
    snapshot_ = std::move(plan.snapshot);
    version_ = plan.version;
    Attempt();
  }

  void AnswerFailure(const std::shared_ptr<Endpoint>& endpoint, const UpstreamResult& result) {
    const std::string where = "version " + snapshot_->versions[version_].name + " endpoint " + endpoint->address();
    const std::string earlier = RetriedNote(tried_.size() - 1, earlier_errors_, waited_);
    if (result.error == UpstreamError::kTimeout) {
      return Answer(JsonError(504, "upstream " + where + " did not answer within " +
                                       std::to_string(options_.upstream_timeout.count()) + " ms" + earlier));
    }
    Answer(JsonError(502, "upstream " + where + " failed: " + result.message + earlier));
  }

  // Sends a copy to the mirror version (percent of requests), compared when both have answered.
  void StartMirror() {
    const int mirror = snapshot_->mirror_version;
    if (mirror < 0 || mirror == version_ || snapshot_->config.mirror->percent <= 0) return;
    if (RandomBits() % 100 >= static_cast<uint64_t>(snapshot_->config.mirror->percent)) return;
    std::shared_ptr<Endpoint> endpoint =
        ChooseEndpoint(snapshot_->versions[mirror].rest, {}, Clock::now(), options_.max_requests_per_endpoint);
    if (!endpoint) return;
    VersionTargets const& target = snapshot_->versions[mirror];
    target.metrics->mirrored().Increment();
    mirror_ = std::make_shared<MirrorPair>(target.metrics, target.name,
                                           [](int a_status, std::string_view a, int b_status, std::string_view b) {
                                             return ResponsesAgree(a_status, a, b_status, b);
                                           });
    endpoint->Begin();
    upstream_.Send(endpoint, upstream_request_, deadline_, [pair = mirror_, endpoint](UpstreamResult result) {
      endpoint->End();
      if (result.error != UpstreamError::kNone) {
        pair->Offer(false, 0, result.message);
      } else {
        pair->Offer(false, result.response.status, std::move(result.response.body));
      }
    });
  }

  const SnapshotStore& snapshots_;
  std::shared_ptr<const Snapshot> snapshot_;  // routing's, then the newest one at each retry
  HttpUpstream& upstream_;
  const ProxyOptions& options_;
  http::Responder responder_;
  const Clock::time_point start_;
  const Clock::time_point deadline_;
  std::shared_ptr<const UpstreamRequest> upstream_request_;
  std::vector<std::shared_ptr<Endpoint>> tried_;
  int maybe_processed_retries_ = 0;
  std::chrono::milliseconds waited_{0};  // for the endpoint list to change (kWaitForEndpoints)
  std::string earlier_errors_;           // of the attempts before the last, for the error body
  std::shared_ptr<MirrorPair> mirror_;
  int version_ = -1;                          // in snapshot_: the version answering now
  VersionMetrics* routed_metrics_ = nullptr;  // the version routing chose: in-flight gauge, retries
};

}  // namespace

RestProxy::RestProxy(const SnapshotStore& snapshots, HttpUpstream& upstream, ProxyOptions options)
    : snapshots_(snapshots), upstream_(upstream), options_(options) {}

void RestProxy::Handle(http::Request request, http::Responder responder) {
  const Clock::time_point start = Clock::now();
  std::shared_ptr<const Snapshot> snapshot = snapshots_.Load();
  if (!snapshot) {
    responder.Respond(JsonError(503, "the router has no valid configuration yet; see its log and /readyz"));
    return;
  }
  auto call =
      std::make_shared<ProxyCall>(snapshots_, std::move(snapshot), upstream_, options_, std::move(responder), start);
  call->Run(request);
}

}  // namespace mf::router
