#include "server/rest/rest_api.h"

#include <algorithm>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "common/flags.h"
#include "server/codec/kserve_json.h"
#include "server/codec/model_info.h"
#include "server/codec/rest_metadata.h"
#include "server/codec/rest_predict.h"
#include "server/config/triton_model_config.h"
#include "server/observability/request_metrics.h"
#include "server/rest/rest_paths.h"

namespace mf::server::rest {
namespace {

using Clock = std::chrono::steady_clock;

// Everything a handler needs, shared by the handler closures.
struct Context {
  std::shared_ptr<const ModelManager> manager;
  RestApiOptions options;
  std::shared_ptr<std::atomic<bool>> shutting_down;
  std::shared_ptr<DeadlineTimer> timer;
  std::shared_ptr<RunPool> pool;
};

double SecondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Answers `status` as {"error": ...} and records the request.
void Fail(http::Responder& responder, const Status& status, std::string_view model, std::string_view api,
          Clock::time_point start) {
  RecordRequest({model, -1, api, Entrypoint::kRest, status.code(), SecondsSince(start)});
  responder.Respond(http::Response::FromStatus(status));
}

// Answers 504 if the model has not answered by the request's deadline. Returns the ticket the
// completion must Cancel(); when Cancel() fails the deadline has answered already.
DeadlineTimer::Ticket ArmDeadline(const Context& ctx, http::Responder responder, std::string model,
                                  std::string_view api, Clock::time_point start) {
  return ctx.timer->Schedule(start + ctx.options.timeout, [responder, model = std::move(model), api = std::string(api),
                                                           start, timeout = ctx.options.timeout]() mutable {
    Status late = DeadlineExceeded("Deadline exceeded: the model did not answer within " +
                                   std::to_string(timeout.count()) + " ms");
    RecordRequest({model, -1, api, Entrypoint::kRest, late.code(), SecondsSince(start)});
    responder.Respond(http::Response::FromStatus(late));
  });
}

// A run that waits (run pool, batch queue) is skipped once the request's deadline has answered
// 504 for it, or when it would end after that deadline.
Servable::StillWanted WantedUntil(Clock::time_point deadline) {
  return [deadline](Clock::time_point expected_end) { return Servable::MeetsDeadline(deadline, expected_end); };
}

VersionRequest ToVersionRequest(const std::optional<int64_t>& version, const std::optional<std::string>& label) {
  if (version) return VersionRequest::Number(*version);
  if (label) return VersionRequest::Label(*label);
  return VersionRequest::Latest();
}

std::vector<codec::NamedTensorView> OutputViews(const runtime::Signature& signature,
                                                const std::vector<runtime::Tensor>& outputs) {
  std::vector<codec::NamedTensorView> views;
  for (size_t i = 0; i < outputs.size() && i < signature.outputs.size(); ++i) {
    views.push_back({signature.outputs[i].name, &outputs[i]});
  }
  return views;
}

void HandleTfStatus(const Context& ctx, const TfServingPath& p, http::Responder responder, Clock::time_point start) {
  std::optional<int64_t> version = p.version;
  if (p.label) {
    auto labelled = ctx.manager->ResolveLabel(p.model, *p.label);
    if (!labelled.ok()) return Fail(responder, labelled.status(), p.model, "GetModelStatus", start);
    version = *labelled;
  }
  auto statuses = ctx.manager->GetModelStatus(p.model, version);
  if (!statuses.ok()) return Fail(responder, statuses.status(), p.model, "GetModelStatus", start);
  RecordRequest(
      {p.model, version.value_or(-1), "GetModelStatus", Entrypoint::kRest, StatusCode::kOk, SecondsSince(start)});
  responder.Respond(http::Response::Json(200, codec::WriteRestModelStatus(*statuses)));
}

void HandleTfMetadata(const Context& ctx, const TfServingPath& p, http::Responder responder, Clock::time_point start) {
  auto handle = ctx.manager->GetServable(p.model, ToVersionRequest(p.version, p.label));
  if (!handle.ok()) return Fail(responder, handle.status(), p.model, "GetModelMetadata", start);
  const codec::ModelSignature signature = codec::ModelSignature::FromRuntime(handle->servable->signature());
  RecordRequest(
      {p.model, handle->version, "GetModelMetadata", Entrypoint::kRest, StatusCode::kOk, SecondsSince(start)});
  responder.Respond(
      http::Response::Json(200, codec::WriteRestModelMetadata(p.model, handle->version, std::span(&signature, 1))));
}

void HandleTfPredict(const Context& ctx, const TfServingPath& p, http::Request request, http::Responder responder,
                     Clock::time_point start) {
  if (p.kind != TfServingPath::Kind::kPredict) {
    // ONNX models have one predict signature; TF Serving answers this for such models, once the
    // body parsed and the model was found.
    const char* api = p.kind == TfServingPath::Kind::kClassify ? "classification" : "regression";
    const char* method = p.kind == TfServingPath::Kind::kClassify ? "classify" : "regress";
    const char* rpc = p.kind == TfServingPath::Kind::kClassify ? "Classify" : "Regress";
    if (Status syntax = codec::CheckJsonSyntax(request.body); !syntax.ok()) {
      return Fail(responder, syntax, p.model, rpc, start);
    }
    auto handle = ctx.manager->GetServable(p.model, ToVersionRequest(p.version, p.label));
    if (!handle.ok()) return Fail(responder, handle.status(), p.model, rpc, start);
    return Fail(responder,
                InvalidArgument(std::string("Expected ") + api + " signature method_name to be tensorflow/serving/" +
                                method + ". Was: tensorflow/serving/predict"),
                p.model, rpc, start);
  }
  // As in TF Serving, the body is parsed before the model is looked up: a malformed body is a
  // 400 whether or not the model exists.
  std::optional<ServableHandle> handle;
  std::shared_ptr<const codec::ModelSignature> signature;
  auto parsed = codec::ParseRestPredictRequest(request.body, [&]() -> StatusOr<std::span<const codec::ModelSignature>> {
    auto found = ctx.manager->GetServable(p.model, ToVersionRequest(p.version, p.label));
    if (!found.ok()) return found.status();
    handle = std::move(found).value();
    signature = std::make_shared<const codec::ModelSignature>(
        codec::ModelSignature::FromRuntime(handle->servable->signature()));
    return std::span(signature.get(), 1);
  });
  if (!parsed.ok()) return Fail(responder, parsed.status(), p.model, "Predict", start);
  const codec::RestFormat format = parsed->format;
  const ServableHandle& h = *handle;
  std::shared_ptr<const Servable> servable = h.servable;
  const DeadlineTimer::Ticket deadline = ArmDeadline(ctx, responder, p.model, "Predict", start);
  DispatchRun(
      *ctx.pool, servable, std::move(parsed->inputs),
      [responder, servable, timer = ctx.timer, deadline, model = p.model, version = h.version, format, start](
          Status status, std::vector<runtime::Tensor> outputs) mutable {
        if (!timer->Cancel(deadline)) return;  // already answered 504
        std::string body;
        if (status.ok()) {
          auto views = OutputViews(servable->signature(), outputs);
          status = codec::WriteRestPredictResponse(format, views, &body);
        }
        RecordRequest({model, version, "Predict", Entrypoint::kRest, status.code(), SecondsSince(start)});
        http::Response response =
            status.ok() ? http::Response::Json(200, std::move(body)) : http::Response::FromStatus(status);
        response.headers.Set(kModelVersionHeader, std::to_string(version));
        responder.Respond(std::move(response));
      },
      WantedUntil(start + ctx.options.timeout));
}

void HandleV1(const Context& ctx, http::Request request, http::Responder responder) {
  const auto start = Clock::now();
  auto parsed = ParseTfServingPath(request.method, request.path());
  if (!parsed.ok()) return Fail(responder, parsed.status(), "", "Unknown", start);
  switch (parsed->kind) {
    case TfServingPath::Kind::kStatus:
      return HandleTfStatus(ctx, *parsed, std::move(responder), start);
    case TfServingPath::Kind::kMetadata:
      return HandleTfMetadata(ctx, *parsed, std::move(responder), start);
    default:
      return HandleTfPredict(ctx, *parsed, std::move(request), std::move(responder), start);
  }
}

// Versions of `model` that are AVAILABLE, as strings (KServe v2 "versions").
std::vector<std::string> AvailableVersions(const ModelManager& manager, std::string_view model) {
  std::vector<std::string> versions;
  for (int64_t v : manager.AvailableVersions(model)) versions.push_back(std::to_string(v));
  return versions;
}

void HandleV2Infer(const Context& ctx, const V2Path& p, http::Request request, http::Responder responder,
                   Clock::time_point start) {
  auto handle =
      ctx.manager->GetServable(p.model, p.version ? VersionRequest::Number(*p.version) : VersionRequest::Latest());
  if (!handle.ok()) return Fail(responder, handle.status(), p.model, "ModelInfer", start);
  std::optional<size_t> json_length;
  if (auto header = request.headers.Get("Inference-Header-Content-Length")) {
    int64_t length = 0;
    if (!ParseInt64(*header, &length) || length < 0) {
      return Fail(responder, InvalidArgument("Inference-Header-Content-Length must be a non-negative integer"), p.model,
                  "ModelInfer", start);
    }
    json_length = static_cast<size_t>(length);
  }
  auto parsed = codec::ParseV2InferRequest(request.body, json_length);
  if (!parsed.ok()) return Fail(responder, parsed.status(), p.model, "ModelInfer", start);
  std::shared_ptr<const Servable> servable = handle->servable;
  const runtime::Signature& signature = servable->signature();
  // Requested outputs: each must exist; binary per output or per request.
  std::vector<int> selected;
  std::vector<bool> binary;
  if (parsed->outputs.empty()) {
    for (size_t i = 0; i < signature.outputs.size(); ++i) {
      selected.push_back(static_cast<int>(i));
      binary.push_back(parsed->binary_data_output);
    }
  } else {
    for (const auto& requested : parsed->outputs) {
      int index = signature.OutputIndex(requested.name);
      if (index < 0) {
        return Fail(responder,
                    InvalidArgument("unexpected inference output '" + requested.name + "' for model '" + p.model + "'"),
                    p.model, "ModelInfer", start);
      }
      selected.push_back(index);
      binary.push_back(requested.binary_data.value_or(parsed->binary_data_output));
    }
  }
  auto inputs = codec::BindInputs(signature.inputs, std::move(parsed->inputs));
  if (!inputs.ok()) return Fail(responder, inputs.status(), p.model, "ModelInfer", start);
  const DeadlineTimer::Ticket deadline = ArmDeadline(ctx, responder, p.model, "ModelInfer", start);
  DispatchRun(
      *ctx.pool, servable, std::move(inputs).value(),
      [responder, servable, timer = ctx.timer, deadline, model = p.model, version = handle->version, id = parsed->id,
       selected = std::move(selected), binary = std::move(binary),
       start](Status status, std::vector<runtime::Tensor> outputs) mutable {
        if (!timer->Cancel(deadline)) return;  // already answered 504
        http::Response response;
        if (status.ok()) {
          std::vector<codec::NamedTensorView> views;
          for (int index : selected) {
            if (static_cast<size_t>(index) >= outputs.size()) {
              status = Internal("the model returned fewer outputs than its signature declares");
              break;
            }
            views.push_back(
                {servable->signature().outputs[static_cast<size_t>(index)].name, &outputs[static_cast<size_t>(index)]});
          }
          if (status.ok()) {
            std::unique_ptr<bool[]> flags(new bool[binary.size()]);
            std::copy(binary.begin(), binary.end(), flags.get());
            auto written = codec::WriteV2InferResponse(model, std::to_string(version), id, views,
                                                       std::span<const bool>(flags.get(), binary.size()));
            if (written.ok()) {
              if (written->json_length) {
                response = http::Response::Text(200, std::move(written->body), "application/octet-stream");
                response.headers.Set("Inference-Header-Content-Length", std::to_string(*written->json_length));
              } else {
                response = http::Response::Json(200, std::move(written->body));
              }
            } else {
              status = written.status();
            }
          }
        }
        if (!status.ok()) response = http::Response::FromStatus(status);
        RecordRequest({model, version, "ModelInfer", Entrypoint::kRest, status.code(), SecondsSince(start)});
        responder.Respond(std::move(response));
      },
      WantedUntil(start + ctx.options.timeout));
}

void HandleV2(const Context& ctx, http::Request request, http::Responder responder) {
  const auto start = Clock::now();
  auto parsed = ParseV2Path(request.method, request.path());
  if (!parsed.ok()) return Fail(responder, parsed.status(), "", "Unknown", start);
  const V2Path& p = *parsed;
  switch (p.kind) {
    case V2Path::Kind::kServerMetadata: {
      const std::vector<std::string> extensions = {"binary_tensor_data"};
      responder.Respond(http::Response::Json(
          200, codec::WriteV2ServerMetadata("modelfleet", ctx.options.server_version, extensions)));
      return;
    }
    case V2Path::Kind::kLive:
      responder.Respond(http::Response::Text(200, ""));
      return;
    case V2Path::Kind::kReady: {
      bool ready = !ctx.shutting_down->load() && ctx.manager->AllModelsAvailable();
      // The KServe v2 spec answers "not ready" with a 4xx; Triton sends 400. Kubernetes probes
      // fail on either 4xx or 5xx.
      responder.Respond(http::Response::Text(ready ? 200 : 400, ""));
      return;
    }
    case V2Path::Kind::kModelReady: {
      auto handle =
          ctx.manager->GetServable(p.model, p.version ? VersionRequest::Number(*p.version) : VersionRequest::Latest());
      bool ready = handle.ok() && !ctx.shutting_down->load();
      responder.Respond(http::Response::Text(ready ? 200 : 400, ""));
      return;
    }
    case V2Path::Kind::kModelMetadata: {
      auto handle =
          ctx.manager->GetServable(p.model, p.version ? VersionRequest::Number(*p.version) : VersionRequest::Latest());
      if (!handle.ok()) return Fail(responder, handle.status(), p.model, "ModelMetadata", start);
      const codec::ModelSignature signature = codec::ModelSignature::FromRuntime(handle->servable->signature());
      std::vector<std::string> versions =
          p.version ? std::vector<std::string>{std::to_string(*p.version)} : AvailableVersions(*ctx.manager, p.model);
      RecordRequest(
          {p.model, handle->version, "ModelMetadata", Entrypoint::kRest, StatusCode::kOk, SecondsSince(start)});
      responder.Respond(
          http::Response::Json(200, codec::WriteV2ModelMetadata(p.model, versions, "onnx_onnxv1", signature)));
      return;
    }
    case V2Path::Kind::kModelConfig: {
      auto handle =
          ctx.manager->GetServable(p.model, p.version ? VersionRequest::Number(*p.version) : VersionRequest::Latest());
      if (!handle.ok()) return Fail(responder, handle.status(), p.model, "ModelConfig", start);
      auto policy = ctx.manager->GetVersionPolicy(p.model);
      if (!policy.ok()) return Fail(responder, policy.status(), p.model, "ModelConfig", start);
      RecordRequest({p.model, handle->version, "ModelConfig", Entrypoint::kRest, StatusCode::kOk, SecondsSince(start)});
      responder.Respond(
          http::Response::Json(200, TritonModelConfigJson(TritonModelConfig(p.model, *handle->servable, *policy))));
      return;
    }
    case V2Path::Kind::kInfer:
      return HandleV2Infer(ctx, p, std::move(request), std::move(responder), start);
  }
}

bool HasPrefixIgnoreCase(std::string_view path, std::string_view lower_prefix) {
  if (path.size() < lower_prefix.size()) return false;
  for (size_t i = 0; i < lower_prefix.size(); ++i) {
    char c = path[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != lower_prefix[i]) return false;
  }
  return true;
}

}  // namespace

RestApi::RestApi(std::shared_ptr<const ModelManager> manager, RestApiOptions options)
    : manager_(std::move(manager)),
      options_(std::move(options)),
      pool_(options_.run_pool ? options_.run_pool : std::make_shared<RunPool>(options_.run_threads)) {}

http::Headers CorsHeaders() {
  http::Headers headers;
  headers.Set("Access-Control-Allow-Origin", "*");
  return headers;
}

http::Handler RestApi::handler() const {
  auto ctx = std::make_shared<const Context>(Context{manager_, options_, shutting_down_, timer_, pool_});
  http::Router router;
  router.Add("GET", "/metrics", http::MetricsHandler());
  if (options_.monitoring.prometheus_enabled) {
    router.Add("GET", options_.monitoring.prometheus_path, http::MetricsHandler());
  }
  router.SetCatchAll([ctx](http::Request request, http::Responder responder) {
    std::string_view path = request.path();
    if (ctx->options.cors && request.method == "OPTIONS") {
      // A CORS preflight: the methods and headers a browser may use (the origin header comes
      // with every response, from the server's response_headers).
      http::Response preflight;
      preflight.status = 204;
      preflight.headers.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
      auto asked = request.headers.Get("Access-Control-Request-Headers");
      preflight.headers.Set("Access-Control-Allow-Headers", asked ? *asked : std::string_view("Content-Type"));
      preflight.headers.Set("Access-Control-Max-Age", "86400");
      return responder.Respond(std::move(preflight));
    }
    if (HasPrefixIgnoreCase(path, "/v1/")) return HandleV1(*ctx, std::move(request), std::move(responder));
    if (HasPrefixIgnoreCase(path, "/v1")) {
      // "/v1" and "/v1?..." alone: TF Serving's grammar needs /v1/models.
      return responder.Respond(http::Response::FromStatus(
          InvalidArgument("Malformed request: " + request.method + " " + std::string(path))));
    }
    if (path == "/v2" || path.starts_with("/v2/")) {
      return HandleV2(*ctx, std::move(request), std::move(responder));
    }
    responder.Respond(http::Response::FromStatus(
        NotFound("no endpoint " + std::string(path) + "; the APIs are under /v1/models and /v2")));
  });
  return router.AsHandler();
}

}  // namespace mf::server::rest
