#include "tools/local/apiserver/discovery.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "tools/local/openapi/builtin_schemas.h"

namespace mf::local {
namespace {

using json = nlohmann::json;

constexpr const char* kGitVersion = "v1.32.4";

std::string GroupVersion(const std::string& group, const std::string& version) {
  return group.empty() ? version : group + "/" + version;
}

// Versions of each group in a stable order (first seen is preferred).
std::map<std::string, std::vector<std::string>> GroupVersions(const ResourceCatalog::Snapshot& snap) {
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& r : snap) {
    auto& versions = out[r.gvr().group];
    if (std::find(versions.begin(), versions.end(), r.gvr().version) == versions.end()) versions.push_back(r.gvr().version);
  }
  return out;
}

json GroupJson(const std::string& group, const std::vector<std::string>& versions) {
  json vs = json::array();
  for (const auto& v : versions) vs.push_back({{"groupVersion", GroupVersion(group, v)}, {"version", v}});
  return {{"name", group}, {"versions", vs}, {"preferredVersion", vs[0]}};
}

// Schema names as kube-apiserver's OpenAPI uses them: io.k8s.api.apps.v1.Deployment for built-ins,
// the reversed group for custom resources (io.modelfleet.v1alpha1.ModelDeployment).
std::string SchemaName(const ResourceInfo& r) {
  const auto& g = r.gvr().group;
  if (!r.is_custom) {
    std::string short_group = g.empty() ? "core" : g.substr(0, g.find('.'));
    if (g == "apiextensions.k8s.io") return "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1." + r.type.kind;
    return "io.k8s.api." + short_group + "." + r.gvr().version + "." + r.type.kind;
  }
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= g.size()) {
    size_t dot = g.find('.', start);
    if (dot == std::string::npos) dot = g.size();
    parts.push_back(g.substr(start, dot - start));
    start = dot + 1;
  }
  std::string reversed;
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) reversed += (reversed.empty() ? "" : ".") + *it;
  return reversed + "." + r.gvr().version + "." + r.type.kind;
}

constexpr const char* kObjectMetaName = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

// The served schema: the stored one with apiVersion, kind and metadata declared, as
// kube-apiserver publishes CRD schemas.
json PublishedSchema(const ResourceInfo& r) {
  json schema = r.schema.is_object() ? r.schema : json{{"type", "object"}};
  json& props = schema["properties"];
  if (!props.is_object()) props = json::object();
  props["apiVersion"] = {{"type", "string"}, {"description", "APIVersion defines the versioned schema of this representation of an object."}};
  props["kind"] = {{"type", "string"}, {"description", "Kind is a string value representing the REST resource this object represents."}};
  props["metadata"] = {{"allOf", {{{"$ref", std::string("#/components/schemas/") + kObjectMetaName}}}},
                       {"default", json::object()}, {"description", "Standard object's metadata."}};
  return schema;
}

json Gvk(const ResourceInfo& r) {
  return {{"group", r.gvr().group}, {"version", r.gvr().version}, {"kind", r.type.kind}};
}

// The query parameters kube-apiserver documents for an action, as (name, description); the
// PATCH operation's fieldValidation is what kubectl apply looks for before it sends Strict.
std::vector<std::pair<std::string, std::string>> QueryParams(const std::string& action) {
  std::vector<std::pair<std::string, std::string>> params = {{"pretty", "If 'true', then the output is pretty printed."}};
  if (action == "patch" || action == "put" || action == "post") {
    params.emplace_back("dryRun", "When present, indicates that modifications should not be persisted.");
    params.emplace_back("fieldManager",
                        "fieldManager is a name associated with the actor or entity that is making these changes.");
    params.emplace_back("fieldValidation",
                        "fieldValidation instructs the server on how to handle objects in the request containing "
                        "unknown or duplicate fields. Valid values are: Ignore, Warn, Strict.");
  }
  if (action == "patch") params.emplace_back("force", "Force is going to \"force\" Apply requests.");
  return params;
}

json QueryParam(const std::string& name, const std::string& description) {
  return {{"name", name}, {"in", "query"}, {"description", description}, {"schema", {{"type", "string"}}}, {"uniqueItems", true}};
}

json Operation(const ResourceInfo& r, const std::string& action, const std::string& ref, bool with_body) {
  json op = {{"operationId", action + r.type.kind},
             {"x-kubernetes-action", action},
             {"x-kubernetes-group-version-kind", Gvk(r)},
             {"responses", {{"200", {{"description", "OK"}, {"content", {{"application/json", {{"schema", {{"$ref", ref}}}}}}}}}}}};
  json params = json::array();
  for (const auto& [name, description] : QueryParams(action)) params.push_back(QueryParam(name, description));
  op["parameters"] = params;
  if (with_body) {
    json content = json::object();
    if (action == "patch") {
      // No strategic-merge-patch+json: kubectl then computes strategic patches for built-in kinds
      // from its compiled-in types, which know the lists' merge keys (the generated schemas do
      // not carry x-kubernetes-patch-merge-key), and uses merge patches for custom resources.
      for (const char* type : {"application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"}) {
        content[type] = {{"schema", {{"type", "object"}}}};
      }
    } else {
      content["application/json"] = {{"schema", {{"$ref", ref}}}};
    }
    op["requestBody"] = {{"content", content}, {"required", true}};
  }
  return op;
}

struct SchemaNames {
  std::string object;  // "#/components/schemas/" target of the kind
  std::string list;    // of its List
};

// Adds the kind's schema, its List's and everything they reference to `schemas`. Built-in kinds
// use the generated schemas; custom resources their CRD's schema, published with apiVersion,
// kind and metadata declared.
SchemaNames AddSchemas(const ResourceInfo& r, json& schemas) {
  const json& builtin = BuiltinSchemas();
  std::set<std::string> wanted = {kObjectMetaName};
  SchemaNames names;
  std::optional<std::string> builtin_name;
  if (!r.is_custom) builtin_name = BuiltinSchemaName(r.gvr().group, r.gvr().version, r.type.kind);
  if (builtin_name) {
    names.object = *builtin_name;
    wanted.insert(*builtin_name);
    if (auto list = BuiltinSchemaName(r.gvr().group, r.gvr().version, r.type.kind + "List")) {
      names.list = *list;
      wanted.insert(*list);
    }
  } else {
    names.object = SchemaName(r);
    json schema = PublishedSchema(r);
    schema["x-kubernetes-group-version-kind"] = json::array({Gvk(r)});
    schemas[names.object] = std::move(schema);
  }
  if (names.list.empty()) {
    names.list = names.object + "List";
    schemas[names.list] = {
        {"type", "object"},
        {"description", r.type.kind + "List is a list of " + r.type.kind},
        {"required", {"items"}},
        {"properties",
         {{"items", {{"type", "array"}, {"items", {{"$ref", kComponentsRef + names.object}}}}},
          {"apiVersion", {{"type", "string"}}},
          {"kind", {{"type", "string"}}},
          {"metadata",
           {{"allOf", {{{"$ref", std::string(kComponentsRef) + "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"}}}}}}}},
        {"x-kubernetes-group-version-kind",
         {{{"group", r.gvr().group}, {"version", r.gvr().version}, {"kind", r.type.kind + "List"}}}}};
    wanted.insert("io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta");
  }
  AddReferencedSchemas(builtin, wanted);
  for (const auto& name : wanted) {
    if (!schemas.contains(name) && builtin.contains(name)) schemas[name] = builtin[name];
  }
  return names;
}

json QueryParamV2(const std::string& name, const std::string& description) {
  return {{"name", name}, {"in", "query"}, {"description", description}, {"type", "string"}, {"uniqueItems", true}};
}

// A Swagger 2.0 operation, shaped as kube-apiserver's /openapi/v2 writes them.
json OperationV2(const ResourceInfo& r, const std::string& action, const std::string& ref, bool with_body) {
  json op = {
      {"operationId", action + r.type.kind},
      {"x-kubernetes-action", action},
      {"x-kubernetes-group-version-kind", Gvk(r)},
      {"produces", {"application/json", "application/yaml"}},
      {"schemes", {"https"}},
      {"responses",
       {{"200", {{"description", "OK"}, {"schema", {{"$ref", ref}}}}}, {"401", {{"description", "Unauthorized"}}}}}};
  json params = json::array();
  for (const auto& [name, description] : QueryParams(action)) params.push_back(QueryParamV2(name, description));
  if (with_body) {
    json body_schema = action == "patch" ? json{{"type", "object"}} : json{{"$ref", ref}};
    params.push_back({{"name", "body"}, {"in", "body"}, {"required", true}, {"schema", body_schema}});
  }
  op["parameters"] = params;
  op["consumes"] = action == "patch" ? json{"application/json-patch+json", "application/merge-patch+json",
                                            "application/apply-patch+yaml"}
                                     : json{"*/*"};
  return op;
}

json PathParamsV2(bool namespaced, bool named) {
  json params = json::array();
  if (named)
    params.push_back({{"name", "name"},
                      {"in", "path"},
                      {"required", true},
                      {"type", "string"},
                      {"uniqueItems", true},
                      {"description", "name of the object"}});
  if (namespaced)
    params.push_back({{"name", "namespace"},
                      {"in", "path"},
                      {"required", true},
                      {"type", "string"},
                      {"uniqueItems", true},
                      {"description", "object name and auth scope, such as for teams and projects"}});
  return params;
}

// The collection, object and status paths of `r` under `root` ("/api/v1", "/apis/apps/v1").
void AddPaths(const ResourceInfo& r, const std::string& root, const SchemaNames& names, bool swagger2, json& paths) {
  std::string ref_prefix = swagger2 ? "#/definitions/" : kComponentsRef;
  std::string ref = ref_prefix + names.object;
  std::string list_ref = ref_prefix + names.list;
  auto op = [&](const std::string& action, const std::string& target, bool with_body) {
    return swagger2 ? OperationV2(r, action, target, with_body) : Operation(r, action, target, with_body);
  };
  std::string prefix = root + (r.type.namespaced ? "/namespaces/{namespace}/" : "/") + r.gvr().resource;
  json& collection = paths[prefix];
  collection = {{"get", op("list", list_ref, false)}, {"post", op("post", ref, true)}};
  json& object = paths[prefix + "/{name}"];
  object = {{"get", op("get", ref, false)},
            {"put", op("put", ref, true)},
            {"patch", op("patch", ref, true)},
            {"delete", op("delete", ref, false)}};
  if (swagger2) {
    collection["parameters"] = PathParamsV2(r.type.namespaced, false);
    object["parameters"] = PathParamsV2(r.type.namespaced, true);
  }
  if (r.type.has_status_subresource) {
    json& status = paths[prefix + "/{name}/status"];
    status = {{"get", op("get", ref, false)}, {"put", op("put", ref, true)}, {"patch", op("patch", ref, true)}};
    if (swagger2) status["parameters"] = PathParamsV2(r.type.namespaced, true);
  }
}

}  // namespace

json VersionInfo() {
  return {{"major", "1"}, {"minor", "32"}, {"gitVersion", kGitVersion},
          {"gitCommit", "modelfleet-local"}, {"gitTreeState", "clean"}, {"buildDate", "2026-01-01T00:00:00Z"},
          {"goVersion", "go1.23.0"}, {"compiler", "gc"}, {"platform", "linux/amd64"}};
}

json CoreApiVersions(const std::string& server_address) {
  return {{"kind", "APIVersions"}, {"versions", {"v1"}},
          {"serverAddressByClientCIDRs", {{{"clientCIDR", "0.0.0.0/0"}, {"serverAddress", server_address}}}}};
}

json ApiGroupList(const ResourceCatalog::Snapshot& snap) {
  json groups = json::array();
  for (const auto& [group, versions] : GroupVersions(snap)) {
    if (!group.empty()) groups.push_back(GroupJson(group, versions));
  }
  return {{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", groups}};
}

std::optional<json> ApiGroup(const ResourceCatalog::Snapshot& snap, const std::string& group) {
  auto all = GroupVersions(snap);
  auto it = all.find(group);
  if (group.empty() || it == all.end()) return std::nullopt;
  json g = GroupJson(group, it->second);
  g["kind"] = "APIGroup";
  g["apiVersion"] = "v1";
  return g;
}

std::optional<json> ApiResourceList(const ResourceCatalog::Snapshot& snap, const std::string& group, const std::string& version) {
  json resources = json::array();
  for (const auto& r : snap) {
    if (r.gvr().group != group || r.gvr().version != version) continue;
    json entry = {{"name", r.gvr().resource}, {"singularName", r.singular}, {"namespaced", r.type.namespaced},
                  {"kind", r.type.kind},
                  {"verbs", {"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}}};
    if (!r.short_names.empty()) entry["shortNames"] = r.short_names;
    if (!r.categories.empty()) entry["categories"] = r.categories;
    resources.push_back(entry);
    if (r.type.has_status_subresource) {
      resources.push_back({{"name", r.gvr().resource + "/status"}, {"singularName", ""}, {"namespaced", r.type.namespaced},
                           {"kind", r.type.kind}, {"verbs", {"get", "patch", "update"}}});
    }
    if (r.scale) {
      resources.push_back({{"name", r.gvr().resource + "/scale"}, {"singularName", ""}, {"namespaced", r.type.namespaced},
                           {"group", "autoscaling"}, {"version", "v1"}, {"kind", "Scale"}, {"verbs", {"get", "patch", "update"}}});
    }
    if (r.has_log) {
      resources.push_back({{"name", r.gvr().resource + "/log"}, {"singularName", ""}, {"namespaced", r.type.namespaced},
                           {"kind", r.type.kind}, {"verbs", {"get"}}});
    }
  }
  if (resources.empty()) return std::nullopt;
  return json{{"kind", "APIResourceList"}, {"apiVersion", "v1"}, {"groupVersion", GroupVersion(group, version)},
              {"resources", resources}};
}

json AggregatedDiscovery(const ResourceCatalog::Snapshot& snap, bool core) {
  json items = json::array();
  for (const auto& [group, versions] : GroupVersions(snap)) {
    if (group.empty() != core) continue;
    json version_list = json::array();
    for (const auto& version : versions) {
      json resources = json::array();
      for (const auto& r : snap) {
        if (r.gvr().group != group || r.gvr().version != version) continue;
        json kind = {{"group", group}, {"version", version}, {"kind", r.type.kind}};
        json entry = {{"resource", r.gvr().resource}, {"responseKind", kind},
                      {"scope", r.type.namespaced ? "Namespaced" : "Cluster"}, {"singularResource", r.singular},
                      {"verbs", {"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}}};
        if (!r.short_names.empty()) entry["shortNames"] = r.short_names;
        if (!r.categories.empty()) entry["categories"] = r.categories;
        json subresources = json::array();
        if (r.type.has_status_subresource) {
          subresources.push_back({{"subresource", "status"}, {"responseKind", kind}, {"verbs", {"get", "patch", "update"}}});
        }
        if (r.scale) {
          subresources.push_back({{"subresource", "scale"},
                                  {"responseKind", {{"group", "autoscaling"}, {"version", "v1"}, {"kind", "Scale"}}},
                                  {"verbs", {"get", "patch", "update"}}});
        }
        if (r.has_log) {
          subresources.push_back({{"subresource", "log"}, {"responseKind", {{"group", ""}, {"version", ""}, {"kind", "string"}}},
                                  {"verbs", {"get"}}});
        }
        if (!subresources.empty()) entry["subresources"] = subresources;
        resources.push_back(std::move(entry));
      }
      version_list.push_back({{"version", version}, {"resources", resources}, {"freshness", "Current"}});
    }
    items.push_back({{"metadata", {{"name", group}}}, {"versions", version_list}});
  }
  return {{"kind", "APIGroupDiscoveryList"}, {"apiVersion", "apidiscovery.k8s.io/v2"}, {"metadata", json::object()},
          {"items", items}};
}

json OpenApiV3Root(const ResourceCatalog::Snapshot& snap) {
  json paths = json::object();
  for (const auto& [group, versions] : GroupVersions(snap)) {
    for (const auto& v : versions) {
      std::string path = group.empty() ? "api/" + v : "apis/" + group + "/" + v;
      auto doc = OpenApiV3Document(snap, path);
      // The hash lets clients cache documents; it changes whenever a CRD changes the content.
      std::string hash = std::to_string(std::hash<std::string>{}(doc ? doc->dump() : ""));
      paths[path] = {{"serverRelativeURL", "/openapi/v3/" + path + "?hash=" + hash}};
    }
  }
  return {{"paths", paths}};
}

std::optional<json> OpenApiV3Document(const ResourceCatalog::Snapshot& snap, const std::string& path) {
  std::string group;
  std::string version;
  if (path.rfind("api/", 0) == 0) {
    version = path.substr(4);
  } else if (path.rfind("apis/", 0) == 0) {
    std::string rest = path.substr(5);
    size_t slash = rest.find('/');
    if (slash == std::string::npos) return std::nullopt;
    group = rest.substr(0, slash);
    version = rest.substr(slash + 1);
  } else {
    return std::nullopt;
  }
  json schemas = json::object();
  json paths = json::object();
  bool any = false;
  for (const auto& r : snap) {
    if (r.gvr().group != group || r.gvr().version != version) continue;
    any = true;
    SchemaNames names = AddSchemas(r, schemas);
    AddPaths(r, "/" + path, names, /*swagger2=*/false, paths);
  }
  if (!any) return std::nullopt;
  return json{{"openapi", "3.0.0"}, {"info", {{"title", "Kubernetes"}, {"version", kGitVersion}}},
              {"paths", paths}, {"components", {{"schemas", schemas}}}};
}

json OpenApiV2Document(const ResourceCatalog::Snapshot& snap) {
  json schemas = json::object();
  json paths = json::object();
  for (const auto& r : snap) {
    const std::string& group = r.gvr().group;
    std::string root = group.empty() ? "/api/" + r.gvr().version : "/apis/" + group + "/" + r.gvr().version;
    SchemaNames names = AddSchemas(r, schemas);
    AddPaths(r, root, names, /*swagger2=*/true, paths);
  }
  json definitions = json::object();
  for (auto it = schemas.begin(); it != schemas.end(); ++it) definitions[it.key()] = ToSwagger2Schema(*it);
  return {{"swagger", "2.0"},
          {"info", {{"title", "Kubernetes"}, {"version", kGitVersion}}},
          {"paths", paths},
          {"definitions", definitions},
          {"securityDefinitions",
           {{"BearerToken",
             {{"type", "apiKey"},
              {"name", "authorization"},
              {"in", "header"},
              {"description", "Bearer Token authentication"}}}}},
          {"security", {{{"BearerToken", json::array()}}}}};
}

bool AcceptsJson(std::string_view accept) {
  if (accept.empty()) return true;
  auto trim = [](std::string_view v) {
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
    while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
    return v;
  };
  size_t start = 0;
  while (start <= accept.size()) {
    size_t comma = std::min(accept.find(',', start), accept.size());
    std::string_view range = accept.substr(start, comma - start);
    start = comma + 1;
    std::string_view type = range;
    bool refused = false;  // q=0: "not acceptable"
    if (size_t semi = range.find(';'); semi != std::string_view::npos) {
      type = range.substr(0, semi);
      std::string_view params = range.substr(semi + 1);
      while (!params.empty()) {
        size_t next = std::min(params.find(';'), params.size());
        std::string_view param = trim(params.substr(0, next));
        params = next < params.size() ? params.substr(next + 1) : std::string_view();
        if (param.size() > 2 && (param[0] == 'q' || param[0] == 'Q') && param[1] == '=') {
          refused = std::strtod(std::string(param.substr(2)).c_str(), nullptr) <= 0;
        }
      }
    }
    type = trim(type);
    if (!refused && (type == "application/json" || type == "application/*" || type == "*/*")) return true;
  }
  return false;
}

}  // namespace mf::local
