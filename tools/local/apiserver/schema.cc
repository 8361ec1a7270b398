#include "tools/local/apiserver/schema.h"

#include <algorithm>
#include <regex>

#include "tools/local/apiserver/cel/rules.h"

namespace mf::local {
namespace {

using json = nlohmann::json;

bool PreservesUnknown(const json& schema) {
  return schema.is_object() && schema.value("x-kubernetes-preserve-unknown-fields", false);
}

std::string Join(const std::string& base, const std::string& field) {
  return base.empty() ? field : base + "." + field;
}

void Prune(json& value, const json& schema, const std::string& path, bool root, std::vector<std::string>* removed) {
  if (!schema.is_object()) return;
  if (value.is_object()) {
    const json* props = schema.contains("properties") ? &schema["properties"] : nullptr;
    const json* additional = schema.contains("additionalProperties") ? &schema["additionalProperties"] : nullptr;
    for (auto it = value.begin(); it != value.end();) {
      const std::string key = it.key();
      if (root && (key == "apiVersion" || key == "kind" || key == "metadata")) {
        ++it;
        continue;
      }
      if (props && props->contains(key)) {
        Prune(it.value(), (*props)[key], Join(path, key), false, removed);
        ++it;
      } else if (additional && additional->is_object()) {
        Prune(it.value(), *additional, Join(path, key), false, removed);
        ++it;
      } else if (PreservesUnknown(schema) || (additional && additional->is_boolean() && additional->get<bool>())) {
        ++it;
      } else {
        removed->push_back(Join(path, key));
        it = value.erase(it);
      }
    }
  } else if (value.is_array() && schema.contains("items")) {
    for (size_t i = 0; i < value.size(); ++i) {
      Prune(value[i], schema["items"], path + "[" + std::to_string(i) + "]", false, removed);
    }
  }
}

std::string TypeOf(const json& v) {
  if (v.is_object()) return "object";
  if (v.is_array()) return "array";
  if (v.is_string()) return "string";
  if (v.is_boolean()) return "boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "integer";
  if (v.is_number_float()) {
    double d = v.get<double>();
    return d == static_cast<double>(static_cast<long long>(d)) ? "integer" : "number";
  }
  return "null";
}

void Validate(const json& value, const json& schema, const std::string& path, std::vector<std::string>* errors) {
  if (!schema.is_object()) return;
  const std::string where = path.empty() ? "<root>" : path;
  auto fail = [&](const std::string& message) { errors->push_back(where + ": " + message); };
  if (value.is_null()) {
    if (!schema.value("nullable", false) && schema.contains("type")) {
      fail("Invalid value: \"null\": " + where + " in body must be of type " + schema["type"].get<std::string>());
    }
    return;
  }
  if (schema.value("x-kubernetes-int-or-string", false)) {
    if (!value.is_string() && TypeOf(value) != "integer") fail("Invalid value: " + value.dump() + ": must be an integer or a string");
  } else if (schema.contains("type") && schema["type"].is_string()) {
    std::string want = schema["type"].get<std::string>();
    std::string got = TypeOf(value);
    bool ok = want == got || (want == "number" && got == "integer");
    if (!ok) {
      fail("Invalid value: \"" + got + "\": " + where + " in body must be of type " + want);
      return;
    }
  }
  if (schema.contains("enum") && schema["enum"].is_array()) {
    const json& options = schema["enum"];
    if (std::find(options.begin(), options.end(), value) == options.end()) {
      std::string list;
      for (const auto& o : options) list += (list.empty() ? "" : ", ") + o.dump();
      fail("Unsupported value: " + value.dump() + ": supported values: " + list);
    }
  }
  if (value.is_number()) {
    double v = value.get<double>();
    if (schema.contains("minimum")) {
      double min = schema["minimum"].get<double>();
      bool excl = schema.value("exclusiveMinimum", false);
      if (excl ? v <= min : v < min) {
        fail("Invalid value: " + value.dump() + ": " + where + " in body should be greater than " +
             std::string(excl ? "" : "or equal to ") + schema["minimum"].dump());
      }
    }
    if (schema.contains("maximum")) {
      double max = schema["maximum"].get<double>();
      bool excl = schema.value("exclusiveMaximum", false);
      if (excl ? v >= max : v > max) {
        fail("Invalid value: " + value.dump() + ": " + where + " in body should be less than " +
             std::string(excl ? "" : "or equal to ") + schema["maximum"].dump());
      }
    }
  }
  if (value.is_string()) {
    const std::string s = value.get<std::string>();
    if (schema.contains("minLength") && s.size() < schema["minLength"].get<size_t>()) {
      fail("Invalid value: " + value.dump() + ": " + where + " in body should be at least " + schema["minLength"].dump() + " chars long");
    }
    if (schema.contains("maxLength") && s.size() > schema["maxLength"].get<size_t>()) {
      fail("Too long: may not be longer than " + schema["maxLength"].dump());
    }
    if (schema.contains("pattern") && schema["pattern"].is_string()) {
      try {
        if (!std::regex_search(s, std::regex(schema["pattern"].get<std::string>()))) {
          fail("Invalid value: " + value.dump() + ": " + where + " in body should match '" + schema["pattern"].get<std::string>() + "'");
        }
      } catch (const std::regex_error&) {
        // The CRD was validated on create; an engine difference must not reject objects.
      }
    }
  }
  if (value.is_array()) {
    if (schema.contains("minItems") && value.size() < schema["minItems"].get<size_t>()) {
      fail("Invalid value: " + std::to_string(value.size()) + ": " + where + " in body should have at least " + schema["minItems"].dump() + " items");
    }
    if (schema.contains("maxItems") && value.size() > schema["maxItems"].get<size_t>()) {
      fail("Too many: " + std::to_string(value.size()) + ": must have at most " + schema["maxItems"].dump() + " items");
    }
    if (schema.contains("items")) {
      for (size_t i = 0; i < value.size(); ++i) Validate(value[i], schema["items"], path + "[" + std::to_string(i) + "]", errors);
    }
  }
  if (value.is_object()) {
    if (schema.contains("required") && schema["required"].is_array()) {
      for (const auto& r : schema["required"]) {
        if (r.is_string() && !value.contains(r.get<std::string>())) fail(std::string("Required value") + ": " + Join(path, r.get<std::string>()) + " is required");
      }
    }
    const json* props = schema.contains("properties") ? &schema["properties"] : nullptr;
    for (const auto& [key, child] : value.items()) {
      if (path.empty() && (key == "metadata" || key == "apiVersion" || key == "kind")) continue;
      if (props && props->contains(key)) Validate(child, (*props)[key], Join(path, key), errors);
      else if (schema.contains("additionalProperties") && schema["additionalProperties"].is_object()) {
        Validate(child, schema["additionalProperties"], Join(path, key), errors);
      }
    }
    if (schema.contains("maxProperties") && value.size() > schema["maxProperties"].get<size_t>()) {
      fail("Too many: " + std::to_string(value.size()) + ": must have at most " + schema["maxProperties"].dump() + " items");
    }
  }
}

// Splits ".a.b[0][?(@.type==\"X\")].c" into steps.
struct Step {
  enum Kind { kField, kIndex, kFilter } kind;
  std::string field;
  size_t index = 0;
  std::string filter_field;
  std::string filter_value;
};

std::vector<Step> ParsePath(const std::string& path) {
  std::vector<Step> steps;
  std::string p = path;
  if (!p.empty() && p.front() == '{' && p.back() == '}') p = p.substr(1, p.size() - 2);
  size_t i = 0;
  while (i < p.size()) {
    if (p[i] == '.') {
      ++i;
      size_t end = p.find_first_of(".[", i);
      if (end == std::string::npos) end = p.size();
      if (end > i) steps.push_back({Step::kField, p.substr(i, end - i)});
      i = end;
    } else if (p[i] == '[') {
      size_t end = p.find(']', i);
      if (end == std::string::npos) return {};
      std::string inner = p.substr(i + 1, end - i - 1);
      if (inner.rfind("?(@.", 0) == 0) {
        size_t eq = inner.find("==");
        if (eq == std::string::npos) return {};
        Step s{Step::kFilter};
        s.filter_field = inner.substr(4, eq - 4);
        std::string v = inner.substr(eq + 2);
        if (!v.empty() && v.back() == ')') v.pop_back();
        if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'')) v = v.substr(1, v.size() - 2);
        s.filter_value = v;
        steps.push_back(std::move(s));
      } else {
        Step s{Step::kIndex};
        try {
          s.index = std::stoul(inner);
        } catch (...) {
          return {};
        }
        steps.push_back(std::move(s));
      }
      i = end + 1;
    } else {
      size_t end = p.find_first_of(".[", i);
      if (end == std::string::npos) end = p.size();
      steps.push_back({Step::kField, p.substr(i, end - i)});
      i = end;
    }
  }
  return steps;
}

}  // namespace

std::vector<std::string> PruneUnknownFields(json& object, const json& schema) {
  std::vector<std::string> removed;
  Prune(object, schema, "", true, &removed);
  return removed;
}

void ApplyDefaults(json& value, const json& schema) {
  if (!schema.is_object()) return;
  if (value.is_object()) {
    if (schema.contains("properties")) {
      for (const auto& [key, child] : schema["properties"].items()) {
        if (!value.contains(key) && child.is_object() && child.contains("default")) value[key] = child["default"];
        if (value.contains(key)) ApplyDefaults(value[key], child);
      }
    }
    if (schema.contains("additionalProperties") && schema["additionalProperties"].is_object()) {
      for (auto& [key, child] : value.items()) {
        if (!schema.contains("properties") || !schema["properties"].contains(key)) ApplyDefaults(child, schema["additionalProperties"]);
      }
    }
  } else if (value.is_array() && schema.contains("items")) {
    for (auto& item : value) ApplyDefaults(item, schema["items"]);
  }
}

std::vector<std::string> ValidateAgainstSchema(const json& object, const json& schema, const json* old) {
  std::vector<std::string> errors;
  Validate(object, schema, "", &errors);
  // CEL rules assume the types the schema declares; on a mistyped object they would only add
  // confusing errors.
  if (errors.empty()) errors = cel::EvaluateValidationRules(object, old, schema);
  return errors;
}

std::vector<std::string> ValidateSchemaRules(const json& schema, const std::string& path) {
  return cel::CheckValidationRules(schema, path);
}

json EvaluateJsonPath(const json& object, const std::string& path) {
  const json* node = &object;
  for (const auto& step : ParsePath(path)) {
    if (step.kind == Step::kField) {
      if (!node->is_object() || !node->contains(step.field)) return nullptr;
      node = &(*node)[step.field];
    } else if (step.kind == Step::kIndex) {
      if (!node->is_array() || step.index >= node->size()) return nullptr;
      node = &(*node)[step.index];
    } else {
      if (!node->is_array()) return nullptr;
      const json* match = nullptr;
      for (const auto& e : *node) {
        if (e.is_object() && e.contains(step.filter_field)) {
          const json& f = e[step.filter_field];
          std::string text = f.is_string() ? f.get<std::string>() : f.dump();
          if (text == step.filter_value) {
            match = &e;
            break;
          }
        }
      }
      if (!match) return nullptr;
      node = match;
    }
  }
  return *node;
}

bool SetAtJsonPath(json& object, const std::string& path, json value) {
  auto steps = ParsePath(path);
  if (steps.empty()) return false;
  json* node = &object;
  for (const auto& step : steps) {
    if (step.kind != Step::kField) return false;
    if (!node->is_object()) *node = json::object();
    node = &(*node)[step.field];
  }
  *node = std::move(value);
  return true;
}

}  // namespace mf::local
