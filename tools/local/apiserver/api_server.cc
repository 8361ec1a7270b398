#include "tools/local/apiserver/api_server.h"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <map>
#include <optional>

#include "common/logging.h"
#include "tools/local/apiserver/api_errors.h"
#include "tools/local/apiserver/apply.h"
#include "tools/local/apiserver/discovery.h"
#include "tools/local/apiserver/field_validation.h"
#include "tools/local/apiserver/list_pagination.h"
#include "tools/local/apiserver/patch.h"
#include "tools/local/apiserver/pod_log.h"
#include "tools/local/apiserver/protobuf_body.h"
#include "tools/local/apiserver/schema.h"
#include "tools/local/apiserver/table.h"
#include "tools/local/store/object_meta.h"
#include "tools/local/store/selector.h"

namespace mf::local {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

const GroupVersionResource kCrds{"apiextensions.k8s.io", "v1", "customresourcedefinitions"};

std::string PercentDecode(std::string_view in, bool plus_is_space) {
  std::string out;
  for (size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '%' && i + 2 < in.size()) {
      int value = 0;
      auto [p, ec] = std::from_chars(in.data() + i + 1, in.data() + i + 3, value, 16);
      if (ec == std::errc() && p == in.data() + i + 3) {
        out.push_back(static_cast<char>(value));
        i += 2;
        continue;
      }
    }
    out.push_back(plus_is_space && c == '+' ? ' ' : c);
  }
  return out;
}

std::map<std::string, std::string> ParseQuery(std::string_view query) {
  std::map<std::string, std::string> out;
  size_t start = 0;
  while (start <= query.size() && !query.empty()) {
    size_t amp = query.find('&', start);
    if (amp == std::string_view::npos) amp = query.size();
    std::string_view pair = query.substr(start, amp - start);
    if (!pair.empty()) {
      size_t eq = pair.find('=');
      std::string key = PercentDecode(pair.substr(0, eq), true);
      std::string value = eq == std::string_view::npos ? "" : PercentDecode(pair.substr(eq + 1), true);
      out.emplace(std::move(key), std::move(value));
    }
    start = amp + 1;
  }
  return out;
}

bool Truthy(const std::string& v) { return v == "true" || v == "True" || v == "1" || v == "TRUE"; }

json YamlToJson(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Sequence: {
      json a = json::array();
      for (const auto& e : node) a.push_back(YamlToJson(e));
      return a;
    }
    case YAML::NodeType::Map: {
      json o = json::object();
      for (const auto& kv : node) o[kv.first.as<std::string>()] = YamlToJson(kv.second);
      return o;
    }
    case YAML::NodeType::Scalar: {
      const std::string& s = node.Scalar();
      if (node.Tag() == "!") return s;  // quoted: always a string
      if (s == "null" || s == "~" || s.empty()) return nullptr;
      if (s == "true" || s == "True") return true;
      if (s == "false" || s == "False") return false;
      int64_t i = 0;
      auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), i);
      if (ec == std::errc() && p == s.data() + s.size()) return i;
      double d = 0;
      auto [pd, ecd] = std::from_chars(s.data(), s.data() + s.size(), d);
      if (ecd == std::errc() && pd == s.data() + s.size()) return d;
      return s;
    }
  }
  return nullptr;
}

std::string MediaType(const http::Request& r) {
  std::string ct(r.headers.Get("Content-Type").value_or("application/json"));
  ct = ct.substr(0, ct.find(';'));
  while (!ct.empty() && ct.back() == ' ') ct.pop_back();
  std::transform(ct.begin(), ct.end(), ct.begin(), ::tolower);
  return ct;
}

StatusOr<json> ParseJsonOrYaml(const std::string& body, bool yaml) {
  if (yaml) {
    try {
      return YamlToJson(YAML::Load(body));
    } catch (const YAML::Exception& e) {
      return FailedPrecondition(std::string("the request body is not valid YAML: ") + e.what());
    }
  }
  json parsed = json::parse(body, nullptr, false);
  if (parsed.is_discarded()) return FailedPrecondition("the request body is not valid JSON");
  return parsed;
}

// A create/update body: JSON, YAML or the protobuf envelope.
StatusOr<json> DecodeObjectBody(const http::Request& r) {
  std::string media = MediaType(r);
  if (media == kProtobufContentType) return DecodeKubernetesProtobuf(r.body);
  MF_ASSIGN_OR_RETURN(json object, ParseJsonOrYaml(r.body, media.find("yaml") != std::string::npos));
  if (!object.is_object()) return FailedPrecondition("the request body must be a JSON object");
  return object;
}

std::string Now() { return FormatTime(std::chrono::system_clock::now()); }

}  // namespace

// What PodLog() hands StartLogFollow(): the open file, the part already read, and the instance.
struct LogFollowStart {
  std::shared_ptr<LogFile> file;
  std::string initial;
  std::string running_id;
  PodLogOptions options;
};

struct ApiServer::Call {
  http::Request request;
  std::map<std::string, std::string> query;
  std::vector<std::string> segments;
  std::shared_ptr<const ResourceCatalog::Snapshot> snap;
  const ResourceInfo* resource = nullptr;
  std::string ns;
  std::string name;
  std::string subresource;
  bool legacy_watch = false;  // /api/v1/watch/... paths
  // Set by PodLog() when it answers with status 0: follow this log in a stream.
  std::optional<LogFollowStart> log_follow;

  std::string Param(const std::string& key) const {
    auto it = query.find(key);
    return it == query.end() ? "" : it->second;
  }
  bool WantsTable() const {
    auto accept = request.headers.Get("Accept");
    return accept && accept->find("as=Table") != std::string_view::npos;
  }
  // kubectl offers apidiscovery.k8s.io v2, then v2beta1, then plain JSON in Accept; we serve v2
  // when it is offered before any plain media type.
  bool WantsAggregatedDiscovery() const {
    std::string_view accept = request.headers.Get("Accept").value_or("");
    while (!accept.empty()) {
      size_t comma = accept.find(',');
      std::string entry(accept.substr(0, comma));
      accept = comma == std::string_view::npos ? std::string_view() : accept.substr(comma + 1);
      entry.erase(std::remove(entry.begin(), entry.end(), ' '), entry.end());
      std::map<std::string, std::string> params;
      size_t at = entry.find(';');
      while (at != std::string::npos) {
        size_t next = entry.find(';', at + 1);
        std::string param = entry.substr(at + 1, next == std::string::npos ? std::string::npos : next - at - 1);
        size_t eq = param.find('=');
        if (eq != std::string::npos) params[param.substr(0, eq)] = param.substr(eq + 1);
        at = next;
      }
      if (params["g"] == "apidiscovery.k8s.io" && params["v"] == "v2" && params["as"] == "APIGroupDiscoveryList") return true;
      if (params.empty()) return false;  // a plain media type is preferred
    }
    return false;
  }
  ObjectRef Ref() const { return {resource->gvr(), ns, name}; }
  json Details() const {
    json d = {{"kind", resource ? resource->gvr().resource : ""}};
    if (!name.empty()) d["name"] = name;
    if (resource && !resource->gvr().group.empty()) d["group"] = resource->gvr().group;
    return d;
  }
  http::Response Error(const Status& s) const { return ErrorResponse(ApiErrorFrom(s), Details()); }
  WriteOptions Write() const { return {.dry_run = Param("dryRun") == "All"}; }
  bool DryRun() const { return Param("dryRun") == "All"; }
  std::string FieldManager() const {
    std::string m = Param("fieldManager");
    if (!m.empty()) return m;
    std::string agent(request.headers.Get("User-Agent").value_or("unknown"));
    return agent.substr(0, agent.find('/'));
  }
};

ApiServer::ApiServer(Store* store, ApiServerOptions options) : store_(store), options_(std::move(options)) {}

ApiServer::~ApiServer() {
  stopping_ = true;
  std::list<StreamThread> streams;
  {
    std::lock_guard lock(streams_mu_);
    streams.swap(streams_);
  }
  for (auto& s : streams) s.stop();
  for (auto& s : streams) s.thread.join();
}

void ApiServer::RunStreamThread(std::function<void()> body, std::function<void()> stop) {
  std::lock_guard lock(streams_mu_);
  // ~ApiServer sets stopping_ before it takes the list: a stream started after that never runs
  // (its http::Stream is dropped, which ends the response).
  if (stopping_) return;
  // Reap streams that ended so a long-running server does not accumulate threads.
  for (auto it = streams_.begin(); it != streams_.end();) {
    if (*it->finished) {
      it->thread.join();
      it = streams_.erase(it);
    } else {
      ++it;
    }
  }
  auto finished = std::make_shared<std::atomic<bool>>(false);
  std::thread thread([body = std::move(body), finished] {
    body();
    *finished = true;
  });
  streams_.push_back({std::move(thread), finished, std::move(stop)});
}

Status ApiServer::Start() {
  // Built-in kinds are decoded as kube-apiserver decodes them: unknown fields dropped and reported
  // to the request's fieldValidation.
  for (const auto& r : *catalog_.snapshot()) {
    store_->RegisterType(r.is_custom ? r.type : WithBuiltinFieldValidation(r.type));
  }
  MF_ASSIGN_OR_RETURN(auto crds, store_->List(kCrds, ""));
  for (const auto& crd : crds.items) SyncCrd(crd["metadata"].value("name", ""));
  return Status::Ok();
}

void ApiServer::SyncCrd(const std::string& name) {
  std::lock_guard lock(crd_mu_);
  auto snap = catalog_.snapshot();
  std::vector<GroupVersionResource> before;
  for (const auto& r : *snap) {
    if (r.is_custom && r.gvr().resource + "." + r.gvr().group == name) before.push_back(r.gvr());
  }
  std::vector<ResourceInfo> now;
  auto crd = store_->Get({kCrds, "", name});
  if (crd.ok() && !IsBeingDeleted(*crd)) {
    auto resources = ResourcesFromCrd(*crd);
    if (resources.ok()) {
      now = std::move(resources).value();
    } else {
      log::Warning("stored CRD is invalid; not serving it", {{"crd", name}, {"error", resources.status().ToString()}});
    }
  }
  for (const auto& gvr : before) {
    bool kept = std::any_of(now.begin(), now.end(), [&](const ResourceInfo& r) { return r.gvr() == gvr; });
    // A version that stops being served keeps its objects; deleting the CRD deletes them.
    if (!kept && !crd.ok()) {
      if (Status s = store_->UnregisterType(gvr); !s.ok()) {
        log::Warning("could not remove the resources of a deleted CRD", {{"resource", gvr.ToString()}, {"error", s.ToString()}});
      }
    }
  }
  for (const auto& r : now) store_->RegisterType(r.type);
  catalog_.SetCrdResources(name, now);
}

http::Handler ApiServer::Handler() {
  return [this](http::Request request, http::Responder responder) { Handle(std::move(request), std::move(responder)); };
}

void ApiServer::HandleUnchecked(http::Request request, http::Responder responder) {
  Call call;
  call.query = ParseQuery(request.query());
  std::string_view path = request.path();
  size_t start = 0;
  while (start < path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string_view::npos) slash = path.size();
    if (slash > start) call.segments.push_back(PercentDecode(path.substr(start, slash - start), false));
    start = slash + 1;
  }
  call.request = std::move(request);
  call.snap = catalog_.snapshot();
  // Legacy /api/v1/watch/... and /apis/G/V/watch/... paths.
  const auto& seg = call.segments;
  size_t watch_at = !seg.empty() && seg[0] == "api" ? 2 : 3;
  if (seg.size() > watch_at && (seg[0] == "api" || seg[0] == "apis") && seg[watch_at] == "watch") {
    call.segments.erase(call.segments.begin() + static_cast<std::ptrdiff_t>(watch_at));
    call.legacy_watch = true;
  }
  bool watch = call.legacy_watch || Truthy(call.Param("watch"));
  if (watch && call.request.method == "GET") {
    // Serve() resolves the resource and answers errors; status 0 means "start the stream".
    http::Response early = Serve(call);
    if (early.status != 0) {
      responder.Respond(std::move(early));
      return;
    }
    StartWatch(call, std::move(responder));
    return;
  }
  http::Response response = Serve(call);
  if (response.status == 0 && call.log_follow) {
    StartLogFollow(call, std::move(responder));
    return;
  }
  if (response.status == 0) response = ErrorResponse(BadRequest("watch is only supported on GET"), call.Details());
  responder.Respond(std::move(response));
}

void ApiServer::Handle(http::Request request, http::Responder responder) {
  // Request bodies are untrusted JSON: a field of an unexpected type (a numeric name, a string
  // where an object belongs) makes nlohmann::json throw while it is read. Nothing is stored before
  // a body is fully checked, so answering 400 here leaves the store as it was.
  try {
    HandleUnchecked(std::move(request), responder);
  } catch (const nlohmann::json::exception& e) {
    responder.Respond(ErrorResponse(BadRequest(std::string("the request body has a field of the wrong type: ") + e.what())));
  }
}

// Answers everything but watches; for a watch request returns status 0 once the resource is
// resolved so that Handle() can start the stream.
http::Response ApiServer::Serve(Call& call) {
  const auto& seg = call.segments;
  const std::string& method = call.request.method;
  auto get_only = [&](const std::function<http::Response()>& fn) {
    if (method != "GET") return ErrorResponse({405, "MethodNotAllowed", "the server does not allow this method on the requested resource"});
    return fn();
  };
  if (seg.empty()) {
    return get_only([&] {
      return JsonResponse(200, {{"paths", {"/api", "/api/v1", "/apis", "/healthz", "/livez", "/openapi/v2", "/openapi/v3", "/readyz", "/version"}}});
    });
  }
  if (seg.size() == 1 && (seg[0] == "healthz" || seg[0] == "livez" || seg[0] == "readyz")) {
    return get_only([&] { return http::Response::Text(200, "ok"); });
  }
  if (seg.size() == 1 && seg[0] == "version") return get_only([&] { return JsonResponse(200, VersionInfo()); });
  if (seg[0] == "openapi") {
    return get_only([&] {
      if (seg.size() == 2 && seg[1] == "v3") return JsonResponse(200, OpenApiV3Root(*call.snap));
      if (seg.size() >= 3 && seg[1] == "v3") {
        std::string rest;
        for (size_t i = 2; i < seg.size(); ++i) rest += (i > 2 ? "/" : "") + seg[i];
        if (auto doc = OpenApiV3Document(*call.snap, rest)) return JsonResponse(200, *doc);
      }
      if (seg.size() == 2 && seg[1] == "v2") {
        // JSON only: client-go asks for the protobuf form alone and, refused, falls back to v3
        // or its compiled-in schemas.
        if (!AcceptsJson(call.request.headers.Get("Accept").value_or(""))) {
          return ErrorResponse({406, "NotAcceptable", "only application/json is served for /openapi/v2"});
        }
        return JsonResponse(200, OpenApiV2Document(*call.snap));
      }
      return ErrorResponse({404, "NotFound", "the server could not find the requested resource"});
    });
  }
  if (seg.size() == 1 && (seg[0] == "api" || seg[0] == "apis") && call.WantsAggregatedDiscovery()) {
    return get_only([&] {
      http::Response response = JsonResponse(200, AggregatedDiscovery(*call.snap, seg[0] == "api"));
      response.headers.Set("Content-Type", kAggregatedDiscoveryContentType);
      response.headers.Set("Vary", "Accept");
      return response;
    });
  }
  std::string group;
  std::string version;
  size_t rest_at = 0;
  if (seg[0] == "api") {
    if (seg.size() == 1) return get_only([&] { return JsonResponse(200, CoreApiVersions(options_.server_address)); });
    version = seg[1];
    rest_at = 2;
  } else if (seg[0] == "apis") {
    if (seg.size() == 1) return get_only([&] { return JsonResponse(200, ApiGroupList(*call.snap)); });
    group = seg[1];
    if (seg.size() == 2) {
      return get_only([&] {
        if (auto g = ApiGroup(*call.snap, group)) return JsonResponse(200, *g);
        return ErrorResponse({404, "NotFound", "the server could not find the requested resource"});
      });
    }
    version = seg[2];
    rest_at = 3;
  } else {
    return ErrorResponse({404, "NotFound", "the server could not find the requested resource"});
  }
  std::vector<std::string> rest(seg.begin() + static_cast<std::ptrdiff_t>(rest_at), seg.end());
  if (rest.empty()) {
    return get_only([&] {
      if (auto list = ApiResourceList(*call.snap, group, version)) return JsonResponse(200, *list);
      return ErrorResponse({404, "NotFound", "the server could not find the requested resource"});
    });
  }
  // namespaces/{ns}/{resource}/... when {resource} is a namespaced resource of this group-version.
  if (rest.size() >= 3 && rest[0] == "namespaces") {
    const ResourceInfo* r = FindResource(*call.snap, group, version, rest[2]);
    if (r && r->type.namespaced) {
      call.ns = rest[1];
      rest.erase(rest.begin(), rest.begin() + 2);
    }
  }
  call.resource = FindResource(*call.snap, group, version, rest[0]);
  if (!call.resource || rest.size() > 3) {
    return ErrorResponse({404, "NotFound", "the server could not find the requested resource"}, call.Details());
  }
  if (rest.size() >= 2) call.name = rest[1];
  if (rest.size() == 3) call.subresource = rest[2];
  if (call.resource->type.namespaced && call.ns.empty() && !call.name.empty()) {
    return ErrorResponse({404, "NotFound", "the server could not find the requested resource"}, call.Details());
  }
  return ServeResource(call);
}

http::Response ApiServer::ServeResource(Call& call) {
  auto mode = ParseFieldValidation(call.Param("fieldValidation"));
  if (!mode.ok()) return ErrorResponse(BadRequest(mode.status().message()), call.Details());
  FieldValidationScope validation(*mode);
  http::Response response = ServeResourceValidated(call);
  for (const auto& field : validation.unknown_fields()) {
    response.headers.Add("Warning", "299 - \"unknown field \\\"" + field + "\\\"\"");
  }
  return response;
}

http::Response ApiServer::ServeResourceValidated(Call& call) {
  const std::string& method = call.request.method;
  bool watch = Truthy(call.Param("watch")) || call.legacy_watch;
  if (std::string dry = call.Param("dryRun"); !dry.empty() && dry != "All") {
    return ErrorResponse({422, "Invalid", "dryRun: Unsupported value: \"" + dry + "\": supported values: \"All\""}, call.Details());
  }
  if (watch && method == "GET") return http::Response{0, {}, {}};
  if (call.name.empty()) return Collection(call);
  if (call.subresource.empty()) return Object(call);
  if (call.subresource == "status" && call.resource->type.has_status_subresource) {
    if (method == "GET") {
      auto o = store_->Get(call.Ref());
      return o.ok() ? JsonResponse(200, *o) : call.Error(o.status());
    }
    if (method == "PUT") {
      auto body = DecodeObjectBody(call.request);
      if (!body.ok()) return call.Error(body.status());
      auto updated = store_->Update(call.Ref(), std::move(body).value(), Subresource::kStatus, call.Write());
      return updated.ok() ? JsonResponse(200, *updated) : call.Error(updated.status());
    }
    if (method == "PATCH") return Patch(call, Subresource::kStatus);
  }
  if (call.subresource == "scale" && call.resource->scale) return Scale(call);
  if (call.subresource == "log" && call.resource->has_log && method == "GET") return PodLog(call);
  return ErrorResponse({404, "NotFound", "the server could not find the requested resource"}, call.Details());
}

http::Response ApiServer::Collection(Call& call) {
  const std::string& method = call.request.method;
  const ResourceInfo& r = *call.resource;
  if (method == "GET") {
    auto paging = ParseListPaging(call.query);
    if (!paging.ok()) return ErrorResponse(BadRequest(paging.status().message()), call.Details());
    ListOptions options{call.Param("labelSelector"), call.Param("fieldSelector")};
    options.limit = paging->limit;
    options.at_resource_version = paging->exact_resource_version;
    if (const auto& from = paging->continue_from) {
      options.start_after = std::make_pair(from->ns, from->name);
      if (from->resource_version > 0) options.at_resource_version = static_cast<uint64_t>(from->resource_version);
    }
    auto list = store_->List(r.gvr(), call.ns, options);
    if (list.ok() && list->resource_version < paging->min_resource_version) {
      return JsonResponse(504, ResourceVersionTooLargeStatus(paging->min_resource_version, list->resource_version));
    }
    if (!list.ok()) {
      if (IsResourceVersionTooOld(list.status()) && paging->continue_from) {
        return JsonResponse(410, ExpiredContinueStatus(*paging->continue_from));
      }
      return IsResourceVersionTooOld(list.status()) ? call.Error(list.status())
                                                    : ErrorResponse(BadRequest(list.status().message()), call.Details());
    }
    std::string rv = std::to_string(list->resource_version);
    json metadata = {{"resourceVersion", rv}};
    if (list->more && !list->items.empty()) {
      const json& last = list->items.back()["metadata"];
      metadata["continue"] = EncodeContinueToken({static_cast<int64_t>(list->resource_version),
                                                  last.value("namespace", ""), last.value("name", "")});
      // As kube-apiserver: the count is given only when no selector makes it expensive there.
      if (options.label_selector.empty() && options.field_selector.empty()) {
        metadata["remainingItemCount"] = list->remaining;
      }
    }
    if (call.WantsTable()) {
      json table = ToTable(r, list->items, rv, call.Param("includeObject"), std::chrono::system_clock::now());
      table["metadata"] = std::move(metadata);
      return JsonResponse(200, table);
    }
    return JsonResponse(200, {{"kind", r.type.kind + "List"}, {"apiVersion", r.gvr().ApiVersion()},
                              {"metadata", std::move(metadata)}, {"items", std::move(list->items)}});
  }
  if (method == "POST") {
    auto body = DecodeObjectBody(call.request);
    if (!body.ok()) return body.status().code() == StatusCode::kUnimplemented ? call.Error(body.status())
                                                                                : ErrorResponse(BadRequest(body.status().message()), call.Details());
    json object = std::move(body).value();
    if (object.contains("kind") && object["kind"] != r.type.kind) {
      return ErrorResponse(BadRequest("the kind of the object (" + object["kind"].dump() + ") does not match the resource " +
                                      r.gvr().ToString() + " (kind " + r.type.kind + ")"), call.Details());
    }
    RecordUpdate(object, json::object(), call.FieldManager(), r.gvr().ApiVersion(), Now());
    if (const json* name = object.contains("metadata") && object["metadata"].is_object() && object["metadata"].contains("name")
                               ? &object["metadata"]["name"] : nullptr;
        name && name->is_string()) {
      call.name = name->get<std::string>();
    }
    auto created = store_->Create(r.gvr(), call.ns, std::move(object), call.Write());
    if (!created.ok()) return call.Error(created.status());
    if (r.gvr() == kCrds && !call.DryRun()) SyncCrd((*created)["metadata"]["name"]);
    return JsonResponse(201, *created);
  }
  if (method == "DELETE") {
    auto list = store_->List(r.gvr(), call.ns, {call.Param("labelSelector"), call.Param("fieldSelector")});
    if (!list.ok()) return ErrorResponse(BadRequest(list.status().message()), call.Details());
    json deleted = json::array();
    for (const auto& item : list->items) {
      ObjectRef ref{r.gvr(), item["metadata"].value("namespace", ""), item["metadata"].value("name", "")};
      DeleteOptions options;
      options.dry_run = call.DryRun();
      auto d = store_->Delete(ref, options);
      if (r.gvr() == kCrds && !call.DryRun()) SyncCrd(ref.name);
      // Gone already (a cascade from an earlier item) is fine; anything else stops here.
      if (!d.ok() && d.status().code() != StatusCode::kNotFound) return call.Error(d.status());
      if (d.ok()) deleted.push_back(*d);
    }
    return JsonResponse(200, {{"kind", r.type.kind + "List"}, {"apiVersion", r.gvr().ApiVersion()},
                              {"metadata", {{"resourceVersion", std::to_string(store_->CurrentResourceVersion())}}},
                              {"items", deleted}});
  }
  return ErrorResponse({405, "MethodNotAllowed", "the server does not allow this method on the requested resource"}, call.Details());
}

http::Response ApiServer::Object(Call& call) {
  const std::string& method = call.request.method;
  const ResourceInfo& r = *call.resource;
  if (method == "GET") {
    auto o = store_->Get(call.Ref());
    if (!o.ok()) return call.Error(o.status());
    if (call.WantsTable()) {
      return JsonResponse(200, ToTable(r, {*o}, ResourceVersionOf(*o), call.Param("includeObject"), std::chrono::system_clock::now()));
    }
    return JsonResponse(200, *o);
  }
  if (method == "PUT") {
    auto body = DecodeObjectBody(call.request);
    if (!body.ok()) return ErrorResponse(BadRequest(body.status().message()), call.Details());
    auto current = store_->Get(call.Ref());
    if (!current.ok()) return call.Error(current.status());
    json object = std::move(body).value();
    RecordUpdate(object, *current, call.FieldManager(), r.gvr().ApiVersion(), Now());
    auto updated = store_->Update(call.Ref(), std::move(object), Subresource::kMain, call.Write());
    if (!updated.ok()) return call.Error(updated.status());
    if (r.gvr() == kCrds && !call.DryRun()) SyncCrd(call.name);
    return JsonResponse(200, *updated);
  }
  if (method == "PATCH") return Patch(call, Subresource::kMain);
  if (method == "DELETE") {
    DeleteOptions options;
    options.dry_run = call.DryRun();
    json body = call.request.body.empty() ? json::object() : json::parse(call.request.body, nullptr, false);
    if (body.is_discarded() || !body.is_object()) return ErrorResponse(BadRequest("the DeleteOptions body is not a JSON object"), call.Details());
    // kubectl sends dryRun in the DeleteOptions body rather than the query.
    if (body.contains("dryRun")) {
      const json& dry = body["dryRun"];
      if (!dry.is_array() || std::any_of(dry.begin(), dry.end(), [](const json& v) { return v != "All"; })) {
        return ErrorResponse({422, "Invalid", "dryRun: Unsupported value: " + dry.dump() + ": supported values: \"All\""}, call.Details());
      }
      if (!dry.empty()) options.dry_run = true;
    }
    std::string policy = body.value("propagationPolicy", call.Param("propagationPolicy"));
    if (body.value("orphanDependents", false) || Truthy(call.Param("orphanDependents"))) policy = "Orphan";
    if (policy == "Foreground") options.propagation = PropagationPolicy::kForeground;
    else if (policy == "Orphan") options.propagation = PropagationPolicy::kOrphan;
    else if (!policy.empty() && policy != "Background") {
      return ErrorResponse({422, "Invalid", "propagationPolicy: Unsupported value: \"" + policy + "\": supported values: \"Foreground\", \"Background\", \"Orphan\""}, call.Details());
    }
    if (body.contains("preconditions") && body["preconditions"].is_object()) {
      const json& pre = body["preconditions"];
      if (pre.contains("uid") && pre["uid"].is_string()) options.precondition_uid = pre["uid"].get<std::string>();
      if (pre.contains("resourceVersion") && pre["resourceVersion"].is_string()) {
        options.precondition_resource_version = pre["resourceVersion"].get<std::string>();
      }
    }
    auto deleted = store_->Delete(call.Ref(), options);
    if (!deleted.ok()) return call.Error(deleted.status());
    if (r.gvr() == kCrds && !options.dry_run) SyncCrd(call.name);
    return JsonResponse(200, *deleted);
  }
  return ErrorResponse({405, "MethodNotAllowed", "the server does not allow this method on the requested resource"}, call.Details());
}

http::Response ApiServer::Patch(Call& call, Subresource sub) {
  const ResourceInfo& r = *call.resource;
  std::string media = MediaType(call.request);
  if (media == "application/apply-patch+yaml") {
    if (sub != Subresource::kMain) return ErrorResponse(BadRequest("server-side apply on subresources is not supported"), call.Details());
    return Apply(call);
  }
  enum { kMerge, kJson, kStrategic } kind;
  if (media == "application/merge-patch+json") kind = kMerge;
  else if (media == "application/json-patch+json") kind = kJson;
  else if (media == "application/strategic-merge-patch+json" && !r.is_custom) kind = kStrategic;
  else {
    return ErrorResponse({415, "UnsupportedMediaType",
                          "the body of the request was in an unknown format - accepted media types include: "
                          "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml" +
                              std::string(r.is_custom ? "" : ", application/strategic-merge-patch+json")},
                         call.Details());
  }
  json patch = json::parse(call.request.body, nullptr, false);
  if (patch.is_discarded()) return ErrorResponse(BadRequest("the patch is not valid JSON"), call.Details());
  const std::string manager = call.FieldManager();
  auto updated = store_->GuaranteedUpdate(call.Ref(), sub, [&](const json& current) -> StatusOr<json> {
    StatusOr<json> next = kind == kMerge ? ApplyMergePatch(current, patch)
                        : kind == kJson  ? ApplyJsonPatch(current, patch)
                                         : ApplyStrategicMergePatch(current, patch);
    if (!next.ok()) return next.status();
    std::string rv = ResourceVersionOf(*next);
    if (!rv.empty() && rv != ResourceVersionOf(current)) {
      return Aborted("Operation cannot be fulfilled on " + r.gvr().ToString() + " \"" + call.name +
                     "\": the object has been modified; please apply your changes to the latest version and try again");
    }
    RecordUpdate(*next, current, manager, r.gvr().ApiVersion(), Now());
    return next;
  }, call.Write());
  if (!updated.ok()) return call.Error(updated.status());
  if (r.gvr() == kCrds && !call.DryRun()) SyncCrd(call.name);
  return JsonResponse(200, *updated);
}

http::Response ApiServer::Apply(Call& call) {
  const ResourceInfo& r = *call.resource;
  ApplyRequest request{call.Param("fieldManager"), Truthy(call.Param("force")), r.gvr().ApiVersion(), Now()};
  if (request.manager.empty()) {
    return ErrorResponse({422, "Invalid", "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"}, call.Details());
  }
  auto applied = ParseJsonOrYaml(call.request.body, true);
  if (!applied.ok() || !applied->is_object()) return ErrorResponse(BadRequest("the apply patch is not a YAML or JSON object"), call.Details());
  if (applied->value("kind", "") != r.type.kind || applied->value("apiVersion", "") != r.gvr().ApiVersion()) {
    return ErrorResponse(BadRequest("apply patch must name apiVersion " + r.gvr().ApiVersion() + " and kind " + r.type.kind), call.Details());
  }
  std::string body_name = (*applied).contains("metadata") ? (*applied)["metadata"].value("name", "") : "";
  if (body_name != call.name) {
    return ErrorResponse(BadRequest("the name of the object (" + body_name + ") does not match the name on the URL (" + call.name + ")"), call.Details());
  }
  // Create when absent; otherwise merge under the store lock. A racing create just retries.
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto current = store_->Get(call.Ref());
    if (!current.ok() && current.status().code() != StatusCode::kNotFound) return call.Error(current.status());
    if (!current.ok()) {
      auto object = ServerSideApply(nullptr, *applied, request);
      if (!object.ok()) return call.Error(object.status());
      auto created = store_->Create(r.gvr(), call.ns, std::move(object).value(), call.Write());
      if (created.ok()) {
        if (r.gvr() == kCrds && !call.DryRun()) SyncCrd(call.name);
        return JsonResponse(201, *created);
      }
      if (created.status().code() != StatusCode::kAlreadyExists) return call.Error(created.status());
      continue;
    }
    auto updated = store_->GuaranteedUpdate(call.Ref(), Subresource::kMain, [&](const json& cur) {
      return ServerSideApply(cur, *applied, request);
    }, call.Write());
    if (!updated.ok() && updated.status().code() == StatusCode::kNotFound) continue;
    if (!updated.ok()) return call.Error(updated.status());
    if (r.gvr() == kCrds && !call.DryRun()) SyncCrd(call.name);
    return JsonResponse(200, *updated);
  }
  return ErrorResponse({409, "Conflict", "the object kept changing between create and update; retry"}, call.Details());
}

http::Response ApiServer::Scale(Call& call) {
  const ResourceInfo& r = *call.resource;
  const ScaleSubresource& scale = *r.scale;
  auto to_scale = [&](const json& o) {
    json replicas = EvaluateJsonPath(o, scale.spec_replicas_path);
    json status_replicas = EvaluateJsonPath(o, scale.status_replicas_path);
    json status = {{"replicas", status_replicas.is_number() ? status_replicas : json(0)}};
    if (!scale.label_selector_path.empty()) {
      json selector = EvaluateJsonPath(o, scale.label_selector_path);
      if (selector.is_string()) status["selector"] = selector;
    }
    const json& meta = o["metadata"];
    json smeta = {{"name", meta["name"]}, {"uid", meta.value("uid", "")}, {"resourceVersion", meta.value("resourceVersion", "")},
                  {"creationTimestamp", meta.value("creationTimestamp", "")}};
    if (meta.contains("namespace")) smeta["namespace"] = meta["namespace"];
    return json{{"kind", "Scale"}, {"apiVersion", "autoscaling/v1"}, {"metadata", smeta},
                {"spec", {{"replicas", replicas.is_number() ? replicas : json(0)}}}, {"status", status}};
  };
  const std::string& method = call.request.method;
  if (method == "GET") {
    auto o = store_->Get(call.Ref());
    return o.ok() ? JsonResponse(200, to_scale(*o)) : call.Error(o.status());
  }
  if (method != "PUT" && method != "PATCH") {
    return ErrorResponse({405, "MethodNotAllowed", "the server does not allow this method on the requested resource"}, call.Details());
  }
  json body = json::parse(call.request.body, nullptr, false);
  if (body.is_discarded()) return ErrorResponse(BadRequest("the request body is not valid JSON"), call.Details());
  std::string media = MediaType(call.request);
  const std::string manager = call.FieldManager();
  auto updated = store_->GuaranteedUpdate(call.Ref(), Subresource::kMain, [&](const json& current) -> StatusOr<json> {
    json desired;
    if (method == "PUT") {
      desired = body;
      std::string rv = desired.contains("metadata") ? desired["metadata"].value("resourceVersion", "") : "";
      if (!rv.empty() && rv != ResourceVersionOf(current)) {
        return Aborted("Operation cannot be fulfilled on " + r.gvr().ToString() + " \"" + call.name +
                       "\": the object has been modified; please apply your changes to the latest version and try again");
      }
    } else {
      json base = to_scale(current);
      StatusOr<json> patched = media == "application/json-patch+json" ? ApplyJsonPatch(base, body)
                             : media == "application/strategic-merge-patch+json" ? ApplyStrategicMergePatch(base, body)
                                                                                  : ApplyMergePatch(base, body);
      if (!patched.ok()) return patched.status();
      desired = std::move(patched).value();
    }
    json replicas = desired.contains("spec") ? desired["spec"].value("replicas", json()) : json();
    if (!replicas.is_number_integer() || replicas.get<int64_t>() < 0) {
      return InvalidArgument("Scale.autoscaling \"" + call.name + "\" is invalid: spec.replicas: Invalid value: " +
                             replicas.dump() + ": must be greater than or equal to 0");
    }
    json next = current;
    SetAtJsonPath(next, scale.spec_replicas_path, replicas);
    RecordUpdate(next, current, manager, r.gvr().ApiVersion(), Now());
    return next;
  }, call.Write());
  if (!updated.ok()) return call.Error(updated.status());
  return JsonResponse(200, to_scale(*updated));
}

namespace {

// The containerID of `container` while it runs (state.running in the pod's status), else "".
std::string RunningContainerId(const json& pod, const std::string& container) {
  const json* status = pod.contains("status") && pod["status"].is_object() ? &pod["status"] : nullptr;
  if (!status || !status->contains("containerStatuses") || !(*status)["containerStatuses"].is_array()) return "";
  for (const auto& c : (*status)["containerStatuses"]) {
    if (!c.is_object() || c.value("name", "") != container) continue;
    if (c.contains("state") && c["state"].is_object() && c["state"].contains("running")) {
      return c.value("containerID", "running");
    }
  }
  return "";
}

}  // namespace

http::Response ApiServer::PodLog(Call& call) {
  auto options = ParsePodLogOptions(call.query);
  if (!options.ok()) return call.Error(options.status());
  auto pod = store_->Get(call.Ref());
  if (!pod.ok()) return call.Error(pod.status());
  std::string container = options->container;
  if (container.empty()) {
    const json containers = (*pod)["spec"].value("containers", json::array());
    if (containers.size() != 1) {
      return ErrorResponse(BadRequest("a container name must be specified for pod " + call.name + ", choose one of: " +
                                      [&] {
                                        std::string names;
                                        for (const auto& c : containers) names += (names.empty() ? "[" : " ") + c.value("name", "");
                                        return names + "]";
                                      }()), call.Details());
    }
    container = containers[0].value("name", "");
  }
  if (!options_.pod_log_path) {
    return ErrorResponse(BadRequest("container \"" + container + "\" in pod \"" + call.name + "\" has no logs: no local kubelet is running"), call.Details());
  }
  options->container = container;
  // The running instance's id is read before the file is opened: if the container restarts in
  // between, the follower sees a different id and ends after what it read, as kubectl expects.
  std::string running_id = options->previous ? "" : RunningContainerId(*pod, container);
  auto file = LogFile::Open(options_.pod_log_path({call.ns, call.name, container, options->previous}).string());
  if (!file.ok()) {
    if (file.status().code() != StatusCode::kNotFound) return call.Error(file.status());
    if (options->previous) {
      return ErrorResponse(BadRequest("previous terminated container \"" + container + "\" in pod \"" + call.name + "\" not found"), call.Details());
    }
    return ErrorResponse(BadRequest("container \"" + container + "\" in pod \"" + call.name + "\" is waiting to start: ContainerCreating"), call.Details());
  }
  auto initial = file->ReadInitial(options->tail_lines, options->limit_bytes);
  if (!initial.ok()) return call.Error(initial.status());
  if (!options->follow || running_id.empty() ||
      (options->limit_bytes >= 0 && initial->size() >= static_cast<uint64_t>(options->limit_bytes))) {
    return http::Response::Text(200, std::move(initial).value());
  }
  call.log_follow = LogFollowStart{std::make_shared<LogFile>(std::move(file).value()), std::move(initial).value(),
                                   std::move(running_id), *options};
  return http::Response{0, {}, {}};
}

void ApiServer::StartLogFollow(Call& call, http::Responder responder) {
  LogFollowStart start = std::move(*call.log_follow);
  http::Headers headers;
  headers.Set("Content-Type", "text/plain");
  auto stream = responder.StartStream(200, headers);
  const uint64_t sent = start.initial.size();
  stream->Write(std::move(start.initial));
  Store* store = store_;
  ObjectRef ref = call.Ref();
  std::string container = start.options.container;
  std::string running_id = start.running_id;
  auto still_running = [store, ref, container, running_id] {
    auto pod = store->Get(ref);
    return pod.ok() && RunningContainerId(*pod, container) == running_id;
  };
  auto stop = std::make_shared<std::atomic<bool>>(false);
  LogFollowOptions follow{.limit_bytes = start.options.limit_bytes};
  RunStreamThread([file = start.file, stream, still_running, stop, follow, sent] {
    FollowLog(std::move(*file), stream, still_running, *stop, follow, sent);
  }, [stop] { *stop = true; });
}

void ApiServer::StartWatch(Call& call, http::Responder responder) {
  const ResourceInfo& r = *call.resource;
  WatchOptions options;
  options.selectors = {call.Param("labelSelector"), call.Param("fieldSelector")};
  if (!call.name.empty()) {
    // A watch on one object: kube-apiserver turns it into a metadata.name field selector.
    std::string by_name = "metadata.name=" + call.name;
    options.selectors.field_selector = options.selectors.field_selector.empty() ? by_name : options.selectors.field_selector + "," + by_name;
  }
  std::string rv = call.Param("resourceVersion");
  if (!rv.empty() && rv != "0") {
    options.resource_version = ParseVersion(rv);
    if (options.resource_version == 0) {
      responder.Respond(ErrorResponse(BadRequest("resourceVersion \"" + rv + "\" is not a valid resource version"), call.Details()));
      return;
    }
  }
  if (call.query.count("sendInitialEvents")) options.send_initial_events = Truthy(call.Param("sendInitialEvents"));
  options.allow_bookmarks = Truthy(call.Param("allowWatchBookmarks"));
  auto duration = options_.max_watch_duration;
  if (std::string t = call.Param("timeoutSeconds"); !t.empty()) {
    int64_t secs = 0;
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), secs);
    if (ec != std::errc() || p != t.data() + t.size() || secs < 0) {
      responder.Respond(ErrorResponse(BadRequest("timeoutSeconds must be a non-negative integer"), call.Details()));
      return;
    }
    if (secs > 0) duration = std::min(duration, std::chrono::seconds(secs));
  }
  auto watcher = store_->Watch(r.gvr(), call.ns, options);
  http::Headers headers;
  headers.Set("Content-Type", "application/json");
  headers.Set("Cache-Control", "no-cache, private");
  if (!watcher.ok()) {
    if (IsResourceVersionTooOld(watcher.status())) {
      // As kube-apiserver: the stream opens, carries one ERROR event with 410 Expired, and ends.
      auto stream = responder.StartStream(200, headers);
      json event = {{"type", "ERROR"}, {"object", StatusObject(ApiErrorFrom(watcher.status()))}};
      stream->Write(event.dump() + "\n");
      stream->Close();
      return;
    }
    responder.Respond(ErrorResponse(BadRequest(watcher.status().message()), call.Details()));
    return;
  }
  if (stopping_) {
    responder.Respond(ErrorResponse({503, "ServiceUnavailable", "the server is shutting down"}));
    return;
  }
  auto stream = responder.StartStream(200, headers);
  std::shared_ptr<Watcher> w = std::move(watcher).value();
  stream->OnClose([w] { w->Stop(); });
  const bool table = call.WantsTable();
  const std::string include_object = call.Param("includeObject");
  ResourceInfo info = r;
  RunStreamThread([w, stream, table, include_object, info, duration] {
    const auto deadline = std::chrono::steady_clock::now() + duration;
    bool first = true;
    while (!stream->closed() && std::chrono::steady_clock::now() < deadline) {
      auto event = w->Next(1s);
      if (!event) {
        if (w->done()) break;
        continue;
      }
      json object = std::move(event->object);
      if (table && event->type != WatchEventType::kBookmark && event->type != WatchEventType::kError) {
        object = ToTable(info, {object}, ResourceVersionOf(object), include_object, std::chrono::system_clock::now());
        if (!first) object["columnDefinitions"] = json::array();
        first = false;
      }
      json line = {{"type", WatchEventTypeName(event->type)}, {"object", std::move(object)}};
      if (!stream->Write(line.dump(-1, ' ', false, json::error_handler_t::replace) + "\n")) break;
    }
    w->Stop();
    stream->Close();
  }, [w] { w->Stop(); });
}

}  // namespace mf::local
