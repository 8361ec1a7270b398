#include "tools/local/apiserver/discovery.h"

#include <functional>
#include <map>
#include <set>

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

// Enough of ObjectMeta for kubectl explain and for patch computations to find metadata fields.
json ObjectMetaSchema() {
  json string_map = {{"type", "object"}, {"additionalProperties", {{"type", "string"}, {"default", ""}}}};
  json owner = {{"type", "object"}, {"required", {"apiVersion", "kind", "name", "uid"}},
                {"properties", {{"apiVersion", {{"type", "string"}}}, {"kind", {{"type", "string"}}}, {"name", {{"type", "string"}}},
                                {"uid", {{"type", "string"}}}, {"controller", {{"type", "boolean"}}}, {"blockOwnerDeletion", {{"type", "boolean"}}}}},
                {"x-kubernetes-map-type", "atomic"}};
  json props = {
      {"name", {{"type", "string"}, {"description", "Name must be unique within a namespace."}}},
      {"generateName", {{"type", "string"}, {"description", "GenerateName is an optional prefix used by the server to generate a unique name."}}},
      {"namespace", {{"type", "string"}, {"description", "Namespace defines the space within which each name must be unique."}}},
      {"uid", {{"type", "string"}, {"description", "UID is the unique in time and space value for this object."}}},
      {"resourceVersion", {{"type", "string"}, {"description", "An opaque value that represents the internal version of this object."}}},
      {"generation", {{"type", "integer"}, {"format", "int64"}, {"description", "A sequence number representing a specific generation of the desired state."}}},
      {"creationTimestamp", {{"type", "string"}, {"format", "date-time"}, {"description", "The server time when this object was created."}}},
      {"deletionTimestamp", {{"type", "string"}, {"format", "date-time"}, {"description", "The time at which this resource will be deleted."}}},
      {"labels", string_map},
      {"annotations", string_map},
      {"finalizers", {{"type", "array"}, {"items", {{"type", "string"}, {"default", ""}}}, {"x-kubernetes-list-type", "set"},
                      {"x-kubernetes-patch-strategy", "merge"}}},
      {"ownerReferences", {{"type", "array"}, {"items", owner}, {"x-kubernetes-list-type", "map"}, {"x-kubernetes-list-map-keys", {"uid"}},
                           {"x-kubernetes-patch-merge-key", "uid"}, {"x-kubernetes-patch-strategy", "merge"}}},
      {"managedFields", {{"type", "array"}, {"items", {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}}}}},
  };
  props["labels"]["description"] = "Map of string keys and values that can be used to organize and categorize objects.";
  props["annotations"]["description"] = "Annotations is an unstructured key value map stored with a resource.";
  return {{"type", "object"}, {"description", "ObjectMeta is metadata that all persisted resources must have."}, {"properties", props}};
}

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

json QueryParam(const std::string& name, const std::string& description) {
  return {{"name", name}, {"in", "query"}, {"description", description}, {"schema", {{"type", "string"}}}, {"uniqueItems", true}};
}

json Operation(const ResourceInfo& r, const std::string& action, const std::string& ref, bool with_body) {
  json op = {{"operationId", action + r.type.kind},
             {"x-kubernetes-action", action},
             {"x-kubernetes-group-version-kind", Gvk(r)},
             {"responses", {{"200", {{"description", "OK"}, {"content", {{"application/json", {{"schema", {{"$ref", ref}}}}}}}}}}}};
  json params = json::array({QueryParam("pretty", "If 'true', then the output is pretty printed.")});
  if (action == "patch" || action == "put" || action == "post") {
    params.push_back(QueryParam("dryRun", "When present, indicates that modifications should not be persisted."));
    params.push_back(QueryParam("fieldManager", "fieldManager is a name associated with the actor or entity that is making these changes."));
    params.push_back(QueryParam("fieldValidation", "fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields. Valid values are: Ignore, Warn, Strict."));
  }
  if (action == "patch") params.push_back(QueryParam("force", "Force is going to \"force\" Apply requests."));
  op["parameters"] = params;
  if (with_body) {
    json content = json::object();
    if (action == "patch") {
      // No strategic-merge-patch+json: kubectl then computes strategic patches for built-in kinds
      // from its compiled-in types (our built-in schemas are not itemized) and uses merge patches
      // for custom resources, as with a real cluster.
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
    std::string name = SchemaName(r);
    json schema = PublishedSchema(r);
    schema["x-kubernetes-group-version-kind"] = json::array({Gvk(r)});
    schemas[name] = schema;
    json list_schema = {{"type", "object"}, {"description", r.type.kind + "List is a list of " + r.type.kind},
                        {"properties", {{"items", {{"type", "array"}, {"items", {{"$ref", "#/components/schemas/" + name}}}}},
                                        {"apiVersion", {{"type", "string"}}}, {"kind", {{"type", "string"}}},
                                        {"metadata", {{"type", "object"}}}}},
                        {"x-kubernetes-group-version-kind", {{{"group", group}, {"version", version}, {"kind", r.type.kind + "List"}}}}};
    schemas[name + "List"] = list_schema;
    std::string prefix = "/" + path + (r.type.namespaced ? "/namespaces/{namespace}/" : "/") + r.gvr().resource;
    std::string ref = "#/components/schemas/" + name;
    paths[prefix] = {{"get", Operation(r, "list", ref + "List", false)}, {"post", Operation(r, "post", ref, true)}};
    paths[prefix + "/{name}"] = {{"get", Operation(r, "get", ref, false)}, {"put", Operation(r, "put", ref, true)},
                                 {"patch", Operation(r, "patch", ref, true)}, {"delete", Operation(r, "delete", ref, false)}};
    if (r.type.has_status_subresource) {
      paths[prefix + "/{name}/status"] = {{"get", Operation(r, "get", ref, false)}, {"put", Operation(r, "put", ref, true)},
                                          {"patch", Operation(r, "patch", ref, true)}};
    }
  }
  if (!any) return std::nullopt;
  schemas[kObjectMetaName] = ObjectMetaSchema();
  return json{{"openapi", "3.0.0"}, {"info", {{"title", "Kubernetes"}, {"version", kGitVersion}}},
              {"paths", paths}, {"components", {{"schemas", schemas}}}};
}

}  // namespace mf::local
