#include "server/router/grpc_proxy.h"

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <charconv>
#include <mutex>

#include "common/logging.h"
#include "http2/grpc_router.h"
#include "http2/grpc_wire.h"
#include "server/router/grpc_mirror_compare.h"
#include "server/router/proxy_common.h"
#include "server/router/routing.h"

namespace mf::router {
namespace {

bool IsConnectionSpecific(std::string_view name) {
  return name == "connection" || name == "keep-alive" || name == "proxy-connection" || name == "transfer-encoding" ||
         name == "upgrade" || name == "host";
}

std::optional<std::string_view> Metadata(const http2::Headers& headers, std::string_view name) {
  for (const auto& [n, v] : headers) {
    if (n == name) return std::string_view(v);
  }
  return std::nullopt;
}

int GrpcStatusOf(const http2::Headers& fields, int fallback) {
  auto value = Metadata(fields, "grpc-status");
  if (!value) return fallback;
  int code = fallback;
  std::from_chars(value->data(), value->data() + value->size(), code);
  return code;
}

// Answers larger than this are not kept for a mirror comparison (the call itself is unaffected).
constexpr size_t kMaxComparedBytes = size_t{16} << 20;

// The copy of a call sent to the mirror version: its answer is kept for the comparison and never
// returned, and it ends at the primary call's deadline.
class GrpcMirrorCall : public StreamHandler, public std::enable_shared_from_this<GrpcMirrorCall> {
 public:
  GrpcMirrorCall(std::shared_ptr<MirrorPair> pair, std::shared_ptr<Endpoint> endpoint)
      : pair_(std::move(pair)), endpoint_(std::move(endpoint)) {}

  void Start(GrpcUpstream& upstream, const H2Request& request, Clock::time_point deadline) {
    std::lock_guard lock(mu_);
    endpoint_->Begin();
    stream_ = upstream.Start(endpoint_, request, shared_from_this());
    timer_ = std::make_shared<boost::asio::steady_timer>(stream_->context());
    timer_->expires_at(deadline);
    timer_->async_wait([weak = weak_from_this()](boost::system::error_code ec) {
      if (ec) return;
      if (auto self = weak.lock()) self->DeadlinePassed();
    });
  }

  void OnHeaders(int status, http2::Headers headers) override {
    std::lock_guard lock(mu_);
    http_status_ = status;
    headers_ = std::move(headers);
  }

  void OnData(std::string_view data) override {
    std::lock_guard lock(mu_);
    too_large_ = too_large_ || body_.size() + data.size() > kMaxComparedBytes;
    if (!too_large_) body_.append(data);
  }

  void OnEnd(http2::Headers trailers) override {
    std::lock_guard lock(mu_);
    FinishLocked(GrpcStatusOf(trailers, GrpcStatusOf(headers_, http_status_ == 200 ? 2 : 14)));
  }

  void OnReset(uint32_t /*error_code*/, bool /*unprocessed*/, std::string /*why*/) override {
    std::lock_guard lock(mu_);
    body_.clear();
    FinishLocked(14);  // UNAVAILABLE, as the client of a reset stream sees it
  }

 private:
  void DeadlinePassed() {
    std::lock_guard lock(mu_);
    if (finished_) return;
    if (stream_) stream_->Cancel();
    body_.clear();
    FinishLocked(4);  // DEADLINE_EXCEEDED
  }

  void FinishLocked(int grpc_code) {
    if (finished_) return;
    finished_ = true;
    endpoint_->End();
    if (timer_) boost::asio::post(timer_->get_executor(), [timer = timer_] { timer->cancel(); });
    if (!too_large_) pair_->Offer(false, grpc_code, std::move(body_));
  }

  const std::shared_ptr<MirrorPair> pair_;
  const std::shared_ptr<Endpoint> endpoint_;
  std::mutex mu_;
  std::shared_ptr<UpstreamStream> stream_;
  std::shared_ptr<boost::asio::steady_timer> timer_;
  http2::Headers headers_;
  int http_status_ = 0;
  std::string body_;
  bool too_large_ = false;
  bool finished_ = false;
};

// One proxied gRPC call. Upstream callbacks arrive on the upstream connection's io thread (a
// retry may use another one) and the deadline timer on the first attempt's: a mutex per call
// orders them.
class GrpcCallProxy : public StreamHandler, public std::enable_shared_from_this<GrpcCallProxy> {
 public:
  GrpcCallProxy(const SnapshotStore& snapshots, std::shared_ptr<const Snapshot> snapshot, GrpcUpstream& upstream,
                const ProxyOptions& options, std::shared_ptr<http2::ResponseStream> client, Clock::time_point start,
                Clock::time_point deadline)
      : snapshots_(snapshots),
        snapshot_(std::move(snapshot)),
        upstream_(upstream),
        options_(options),
        client_(std::move(client)),
        start_(start),
        deadline_(deadline) {}

  void Run(http2::Request& request) {
    const RouterConfig& config = snapshot_->config;
    if (request.body_too_large) {
      return FinishWithStatus(ResourceExhausted("request message larger than the router accepts"));
    }
    HeaderLookup lookup = [&request](std::string_view name) { return Metadata(request.headers, name); };
    VersionPick pick = PickVersion(config, snapshot_->grpc_ready, lookup, RandomBits(), RandomBits());
    if (pick.version < 0) {
      return FinishWithStatus(
          Unavailable(NoReadyEndpointMessage(config, snapshot_->grpc_ready, snapshot_->grpc_total)));
    }
    version_ = pick.version;
    upstream_request_.method = request.method;
    upstream_request_.path = request.path;
    upstream_request_.authority = request.authority;
    upstream_request_.scheme = "http";
    for (auto& [name, value] : request.headers) {
      if (IsConnectionSpecific(name) || (name == "te" && value != "trailers")) continue;
      upstream_request_.headers.emplace_back(std::move(name), std::move(value));
    }
    std::string peer_ip = request.peer.substr(0, request.peer.rfind(':'));
    upstream_request_.headers.emplace_back("x-forwarded-for", peer_ip);
    upstream_request_.body = std::move(request.body);
    retry_safe_ = IsRetrySafeGrpc(request.path);
    StartMirror();
    routed_metrics_ = snapshot_->versions[version_].metrics;
    routed_metrics_->in_flight().Increment();

    std::weak_ptr<GrpcCallProxy> weak = shared_from_this();
    client_->OnClose([weak] {
      if (auto self = weak.lock()) self->ClientGone();
    });
    std::lock_guard lock(mu_);
    Attempt();
  }

  void OnHeaders(int status, http2::Headers headers) override {
    std::lock_guard lock(mu_);
    if (done_) return;
    http_status_ = status;
    headers.emplace_back("x-modelfleet-version", snapshot_->versions[version_].name);
    headers_ = std::move(headers);
    got_headers_ = true;
  }

  void OnData(std::string_view data) override {
    std::lock_guard lock(mu_);
    if (done_) return;
    http2::ResponsePart part;
    if (!headers_sent_) {
      part.status = http_status_;
      part.headers = headers_;
      headers_sent_ = true;
    }
    part.data.assign(data);
    client_->Send(std::move(part));
    if (mirror_) {
      primary_too_large_ = primary_too_large_ || primary_body_.size() + data.size() > kMaxComparedBytes;
      if (!primary_too_large_) primary_body_.append(data);
    }
  }

  void OnEnd(http2::Headers trailers) override {
    std::lock_guard lock(mu_);
    if (done_) return;
    const int code = GrpcStatusOf(trailers, GrpcStatusOf(headers_, http_status_ == 200 ? 2 : 14));
    RecordOutcome(http_status_ >= 500);
    http2::ResponsePart part;
    if (!headers_sent_) {
      part.status = http_status_;
      part.headers = std::move(headers_);
      headers_sent_ = true;
    }
    part.end = true;
    part.trailers = std::move(trailers);
    client_->Send(std::move(part));
    if (mirror_ && !primary_too_large_) mirror_->Offer(true, code, std::move(primary_body_));
    Done(code);
  }

  void OnReset(uint32_t /*error_code*/, bool unprocessed, std::string why) override {
    std::lock_guard lock(mu_);
    if (done_) return;
    RecordOutcome(true);
    const AttemptFailure failure = got_headers_  ? AttemptFailure::kResponseStarted
                                   : unprocessed ? AttemptFailure::kNotDelivered
                                                 : AttemptFailure::kNoResponse;
    RetryOrFailLocked(failure, std::move(why));
  }

 private:
  // Under mu_, after a failed attempt: the next attempt, a wait for the endpoint list to change,
  // or the failure as the answer.
  void RetryOrFailLocked(AttemptFailure failure, std::string why) {
    const Clock::time_point now = Clock::now();
    RetryPlan plan = PlanRetry({.failure = failure,
                                .retry_safe = retry_safe_,
                                .attempts = static_cast<int>(tried_.size()),
                                .maybe_processed_retries = maybe_processed_retries_,
                                .deadline_passed = now >= deadline_,
                                .may_wait = waited_ < kMaxEndpointWait},
                               snapshots_.Load(), snapshot_->versions[version_].name, true, tried_);
    switch (plan.decision) {
      case RetryDecision::kGiveUp: {
        std::string message = "upstream version " + snapshot_->versions[version_].name + " endpoint " +
                              endpoint_->address() + " failed: " + why +
                              RetriedNote(tried_.size() - 1, earlier_errors_, waited_);
        return FinishLocked(Unavailable(message));
      }
      case RetryDecision::kWaitForEndpoints: {
        waited_ += kEndpointWaitStep;
        auto wait = std::make_shared<boost::asio::steady_timer>(upstream_stream_->context());
        wait->expires_after(std::min<Clock::duration>(kEndpointWaitStep, deadline_ - now));
        wait->async_wait(
            [wait, self = shared_from_this(), failure, why = std::move(why)](boost::system::error_code ec) mutable {
              if (ec) return;
              std::lock_guard lock(self->mu_);
              if (!self->done_) self->RetryOrFailLocked(failure, std::move(why));
            });
        return;
      }
      case RetryDecision::kSameVersion:
      case RetryDecision::kOtherVersion:
        break;
    }
    log::Debug("retrying gRPC call on another endpoint", {{"version", snapshot_->versions[version_].name},
                                                          {"endpoint", endpoint_->address()},
                                                          {"error", why},
                                                          {"next", std::string(RetryDecisionName(plan.decision))}});
    routed_metrics_->retries().Increment();
    if (failure == AttemptFailure::kNoResponse) ++maybe_processed_retries_;
    earlier_errors_ += (earlier_errors_.empty() ? "" : "; ") + why;
    snapshot_ = std::move(plan.snapshot);
    version_ = plan.version;
    Attempt();
  }

  // Under mu_.
  void Attempt() {
    endpoint_ =
        ChooseEndpoint(snapshot_->versions[version_].grpc, tried_, Clock::now(), options_.max_requests_per_endpoint);
    if (!endpoint_) {
      return FinishLocked(
          Unavailable(NoEndpointLeftMessage(*snapshot_, version_, true, options_.max_requests_per_endpoint)));
    }
    tried_.push_back(endpoint_);
    endpoint_->Begin();
    attempt_open_ = true;
    upstream_stream_ = upstream_.Start(endpoint_, upstream_request_, shared_from_this());
    if (!timer_) {
      timer_ = std::make_shared<boost::asio::steady_timer>(upstream_stream_->context());
      timer_->expires_at(deadline_);
      timer_->async_wait([weak = std::weak_ptr<GrpcCallProxy>(shared_from_this())](boost::system::error_code ec) {
        if (ec) return;
        if (auto self = weak.lock()) self->DeadlinePassed();
      });
    }
  }

  void DeadlinePassed() {
    std::lock_guard lock(mu_);
    if (done_) return;
    RecordOutcome(true);
    if (upstream_stream_) upstream_stream_->Cancel();
    const std::string where = "upstream version " + snapshot_->versions[version_].name + " endpoint " +
                              (endpoint_ ? endpoint_->address() : "?");
    if (headers_sent_) {
      client_->Send({.end = true,
                     .trailers = {{"grpc-status", "4"},
                                  {"grpc-message",
                                   http2::PercentEncodeGrpcMessage(where + " did not finish within the deadline")}}});
      return Done(4);
    }
    FinishLocked(DeadlineExceeded(
        where + " did not answer within " +
        std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - start_).count()) + " ms"));
  }

  void ClientGone() {
    std::lock_guard lock(mu_);
    if (done_) return;
    RecordOutcome(false);
    if (upstream_stream_) upstream_stream_->Cancel();
    Done(1);  // CANCELLED
  }

  // Sends a copy to the mirror version (percent of calls, only calls that are safe to send twice),
  // compared with the primary's answer when both have finished.
  void StartMirror() {
    const int mirror = snapshot_->mirror_version;
    if (mirror < 0 || mirror == version_ || snapshot_->config.mirror->percent <= 0 || !retry_safe_) return;
    if (RandomBits() % 100 >= static_cast<uint64_t>(snapshot_->config.mirror->percent)) return;
    const VersionTargets& target = snapshot_->versions[mirror];
    std::shared_ptr<Endpoint> endpoint =
        ChooseEndpoint(target.grpc, {}, Clock::now(), options_.max_requests_per_endpoint);
    if (!endpoint) return;
    target.metrics->mirrored().Increment();
    mirror_ = std::make_shared<MirrorPair>(
        target.metrics, target.name,
        [path = upstream_request_.path](int a_code, std::string_view a, int b_code, std::string_view b) {
          return GrpcResponsesAgree(path, a_code, a, b_code, b);
        });
    std::make_shared<GrpcMirrorCall>(mirror_, std::move(endpoint))->Start(upstream_, upstream_request_, deadline_);
  }

  // The endpoint's share of the outcome: outstanding count and outlier detection.
  void RecordOutcome(bool failed) {
    if (!attempt_open_) return;
    attempt_open_ = false;
    endpoint_->End();
    if (!failed) return endpoint_->RecordSuccess();
    if (endpoint_->RecordFailure(Clock::now(), options_.outlier)) {
      snapshot_->versions[version_].metrics->ejections().Increment();
      log::Warning("endpoint ejected after consecutive failures",
                   {{"version", snapshot_->versions[version_].name}, {"endpoint", endpoint_->address()}});
    }
  }

  void FinishWithStatus(const Status& status) {
    std::lock_guard lock(mu_);
    FinishLocked(status);
  }

  void FinishLocked(const Status& status) {
    if (mirror_) mirror_->Offer(true, static_cast<int>(status.code()), "");
    if (headers_sent_) {
      client_->Send({.end = true,
                     .trailers = {{"grpc-status", std::to_string(static_cast<int>(status.code()))},
                                  {"grpc-message", http2::PercentEncodeGrpcMessage(status.message())}}});
    } else {
      http2::ResponsePart part = http2::GrpcErrorResponse(status);
      if (version_ >= 0) part.headers.emplace_back("x-modelfleet-version", snapshot_->versions[version_].name);
      client_->Send(std::move(part));
    }
    Done(static_cast<int>(status.code()));
  }

  void Done(int grpc_code) {
    done_ = true;
    VersionMetrics* m = version_ >= 0 ? snapshot_->versions[version_].metrics : snapshot_->unrouted_metrics;
    if (m) m->RecordRequest(Protocol::kGrpc, grpc_code, std::chrono::duration<double>(Clock::now() - start_).count());
    if (routed_metrics_) routed_metrics_->in_flight().Decrement();
    routed_metrics_ = nullptr;
    if (timer_) {
      boost::asio::post(timer_->get_executor(), [timer = timer_] { timer->cancel(); });
    }
  }

  const SnapshotStore& snapshots_;
  std::shared_ptr<const Snapshot> snapshot_;  // routing's, then the newest one at each retry
  GrpcUpstream& upstream_;
  const ProxyOptions& options_;
  std::shared_ptr<http2::ResponseStream> client_;
  const Clock::time_point start_;
  const Clock::time_point deadline_;
  std::mutex mu_;
  H2Request upstream_request_;
  bool retry_safe_ = false;
  std::vector<std::shared_ptr<Endpoint>> tried_;
  int maybe_processed_retries_ = 0;
  std::chrono::milliseconds waited_{0};  // for the endpoint list to change (kWaitForEndpoints)
  std::shared_ptr<Endpoint> endpoint_;
  std::shared_ptr<UpstreamStream> upstream_stream_;
  std::shared_ptr<boost::asio::steady_timer> timer_;
  std::string earlier_errors_;  // of the attempts before the last, for the error message
  std::shared_ptr<MirrorPair> mirror_;
  std::string primary_body_;  // the answer's DATA, kept only while mirroring, for the comparison
  bool primary_too_large_ = false;
  http2::Headers headers_;
  int http_status_ = 0;
  int version_ = -1;                          // in snapshot_: the version answering now
  VersionMetrics* routed_metrics_ = nullptr;  // the version routing chose: in-flight gauge, retries
  bool got_headers_ = false;
  bool headers_sent_ = false;
  bool attempt_open_ = false;
  bool done_ = false;
};

}  // namespace

GrpcProxy::GrpcProxy(const SnapshotStore& snapshots, GrpcUpstream& upstream, ProxyOptions options)
    : snapshots_(snapshots), upstream_(upstream), options_(options) {}

void GrpcProxy::Handle(http2::Request request, std::shared_ptr<http2::ResponseStream> stream) {
  const Clock::time_point start = Clock::now();
  std::shared_ptr<const Snapshot> snapshot = snapshots_.Load();
  if (!snapshot) {
    stream->Send(
        http2::GrpcErrorResponse(Unavailable("the router has no valid configuration yet; see its log and /readyz")));
    return;
  }
  Clock::time_point deadline = start + options_.upstream_timeout;
  if (auto timeout = Metadata(request.headers, "grpc-timeout")) {
    if (auto parsed = http2::ParseGrpcTimeout(*timeout); parsed.ok()) {
      deadline = std::min(deadline, start + std::chrono::duration_cast<Clock::duration>(
                                                std::min(*parsed, std::chrono::nanoseconds(std::chrono::hours(24)))));
    }
  }
  auto call = std::make_shared<GrpcCallProxy>(snapshots_, std::move(snapshot), upstream_, options_, std::move(stream),
                                              start, deadline);
  call->Run(request);
}

}  // namespace mf::router
