#include "tools/local/openapi/builtin_schemas.h"

#include <map>
#include <tuple>

namespace mf::local {

const std::string& EmbeddedBuiltinSchemasJson();  // builtin_schemas_data.cc, generated

namespace {

using json = nlohmann::json;

constexpr std::string_view kRefPrefix = "#/components/schemas/";

// The name a "$ref" (or an allOf wrapping one) points at; empty when the schema is inline.
std::string RefName(const json& schema) {
  const json* ref_holder = &schema;
  if (!schema.contains("$ref") && schema.contains("allOf") && schema["allOf"].is_array() &&
      schema["allOf"].size() == 1) {
    ref_holder = &schema["allOf"][0];
  }
  if (!ref_holder->is_object() || !ref_holder->contains("$ref") || !(*ref_holder)["$ref"].is_string()) return "";
  const std::string& ref = (*ref_holder)["$ref"].get_ref<const std::string&>();
  return ref.rfind(kRefPrefix, 0) == 0 ? ref.substr(kRefPrefix.size()) : "";
}

// Follows references until an inline schema; null when a reference dangles.
const json* Resolve(const json& schemas, const json& schema) {
  const json* at = &schema;
  for (int hops = 0; hops < 8; ++hops) {
    std::string name = RefName(*at);
    if (name.empty()) return at;
    auto it = schemas.find(name);
    if (it == schemas.end()) return nullptr;
    at = &*it;
  }
  return nullptr;
}

void Prune(const json& schemas, json& value, const json& schema, const std::string& path,
           const std::set<std::string>& keep, std::vector<std::string>& out) {
  const json* s = Resolve(schemas, schema);
  if (!s || !s->is_object()) return;
  if (s->value("x-kubernetes-preserve-unknown-fields", false)) return;
  if (value.is_object()) {
    if (s->contains("properties")) {
      const json& props = (*s)["properties"];
      std::vector<std::string> unknown;
      for (auto it = value.begin(); it != value.end(); ++it) {
        std::string child = path.empty() ? it.key() : path + "." + it.key();
        auto prop = props.find(it.key());
        if (prop == props.end()) {
          if (keep.count(child)) continue;
          unknown.push_back(it.key());
          out.push_back(child);
        } else {
          Prune(schemas, it.value(), *prop, child, keep, out);
        }
      }
      for (const auto& key : unknown) value.erase(key);
    } else if (s->contains("additionalProperties") && (*s)["additionalProperties"].is_object()) {
      for (auto it = value.begin(); it != value.end(); ++it) {
        Prune(schemas, it.value(), (*s)["additionalProperties"], path + "[" + it.key() + "]", keep, out);
      }
    }
  } else if (value.is_array() && s->contains("items") && (*s)["items"].is_object()) {
    for (size_t i = 0; i < value.size(); ++i)
      Prune(schemas, value[i], (*s)["items"], path + "[" + std::to_string(i) + "]", keep, out);
  }
}

void CollectRefs(const json& node, std::vector<std::string>& refs) {
  if (node.is_object()) {
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (it.key() == "$ref" && it->is_string()) {
        const std::string& ref = it->get_ref<const std::string&>();
        if (ref.rfind(kRefPrefix, 0) == 0) refs.push_back(ref.substr(kRefPrefix.size()));
      } else {
        CollectRefs(*it, refs);
      }
    }
  } else if (node.is_array()) {
    for (const auto& item : node) CollectRefs(item, refs);
  }
}

}  // namespace

const json& BuiltinSchemas() {
  // Parsed once; the embedded text is generated, so a parse failure is a build defect.
  static const json* schemas = new json(json::parse(EmbeddedBuiltinSchemasJson()).at("components").at("schemas"));
  return *schemas;
}

std::optional<std::string> BuiltinSchemaName(const std::string& group, const std::string& version,
                                             const std::string& kind) {
  using Key = std::tuple<std::string, std::string, std::string>;
  static const auto* index = [] {
    auto* out = new std::map<Key, std::string>();
    for (auto it = BuiltinSchemas().begin(); it != BuiltinSchemas().end(); ++it) {
      for (const auto& gvk : it->value("x-kubernetes-group-version-kind", json::array())) {
        (*out)[{gvk.value("group", ""), gvk.value("version", ""), gvk.value("kind", "")}] = it.key();
      }
    }
    return out;
  }();
  auto it = index->find({group, version, kind});
  if (it == index->end()) return std::nullopt;
  return it->second;
}

void AddReferencedSchemas(const json& schemas, std::set<std::string>& names) {
  std::vector<std::string> pending(names.begin(), names.end());
  while (!pending.empty()) {
    std::string name = std::move(pending.back());
    pending.pop_back();
    auto it = schemas.find(name);
    if (it == schemas.end()) continue;
    std::vector<std::string> refs;
    CollectRefs(*it, refs);
    for (auto& ref : refs) {
      if (names.insert(ref).second) pending.push_back(std::move(ref));
    }
  }
}

std::vector<std::string> PruneUnknownBuiltinFields(json& object, const std::string& schema_name,
                                                   const std::set<std::string>& keep) {
  std::vector<std::string> unknown;
  const json& schemas = BuiltinSchemas();
  auto it = schemas.find(schema_name);
  if (it == schemas.end()) return unknown;
  Prune(schemas, object, *it, "", keep, unknown);
  return unknown;
}

json ToSwagger2Schema(const json& schema) {
  if (schema.is_array()) {
    json out = json::array();
    for (const auto& item : schema) out.push_back(ToSwagger2Schema(item));
    return out;
  }
  if (!schema.is_object()) return schema;
  json out = json::object();
  for (auto it = schema.begin(); it != schema.end(); ++it) {
    if (it.key() == "$ref" && it->is_string() && it->get_ref<const std::string&>().rfind(kRefPrefix, 0) == 0) {
      out["$ref"] = "#/definitions/" + it->get_ref<const std::string&>().substr(kRefPrefix.size());
    } else {
      out[it.key()] = ToSwagger2Schema(*it);
    }
  }
  // {"allOf": [{"$ref": X}], "description": ...} -> {"$ref": X, "description": ...}: Swagger 2.0
  // allows siblings of $ref (kube-apiserver's v2 document has them), v3.0 does not.
  if (out.contains("allOf") && out["allOf"].is_array() && out["allOf"].size() == 1 && out["allOf"][0].is_object() &&
      out["allOf"][0].size() == 1 && out["allOf"][0].contains("$ref") && !out.contains("$ref")) {
    out["$ref"] = out["allOf"][0]["$ref"];
    out.erase("allOf");
  }
  return out;
}

}  // namespace mf::local
