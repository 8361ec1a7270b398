#include "tools/local/apiserver/cel/rules.h"

#include <algorithm>
#include <mutex>
#include <set>

#include "common/logging.h"
#include "tools/local/apiserver/cel/json_value.h"
#include "tools/local/apiserver/cel/program.h"

namespace mf::local::cel {
namespace {

using json = nlohmann::json;

std::string Trim(const std::string& s) {
  const char* ws = " \t\r\n";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

std::string RuleText(const json& rule) {
  return rule.is_object() && rule.contains("rule") && rule["rule"].is_string() ? rule["rule"].get<std::string>() : "";
}

// kube-apiserver's ruleErrorString: the rule's message, else the rule itself.
std::string RuleErrorString(const json& rule) {
  std::string message = rule.is_object() && rule.contains("message") && rule["message"].is_string() ? Trim(rule["message"].get<std::string>()) : "";
  return message.empty() ? Trim(RuleText(rule)) : message;
}

// kube-apiserver's ruleMessageOrDefault, the error of a rule that is not true.
std::string RuleMessageOrDefault(const json& rule) {
  std::string message = rule.is_object() && rule.contains("message") && rule["message"].is_string() ? Trim(rule["message"].get<std::string>()) : "";
  return message.empty() ? "failed rule: " + Trim(RuleText(rule)) : message;
}

void LogUnsupportedOnce(const std::string& rule, const std::string& why) {
  static std::mutex mu;
  static std::set<std::string> logged;
  {
    std::lock_guard lock(mu);
    if (logged.size() >= 1024 || !logged.insert(rule).second) return;
  }
  log::Warning("CEL validation rule not evaluated: unsupported by the local CEL evaluator", {{"rule", rule}, {"reason", why}});
}

const json* Child(const json& schema, const char* key) {
  if (!schema.is_object()) return nullptr;
  auto it = schema.find(key);
  return it == schema.end() ? nullptr : &*it;
}

std::string JoinField(const std::string& path, const std::string& field) { return path.empty() ? field : path + "." + field; }

class RuleWalker {
 public:
  explicit RuleWalker(std::vector<std::string>* errors) : errors_(errors) {}

  void Walk(const json& value, const json* old, const json& schema, const std::string& path, bool root) {
    if (out_of_budget_ || !schema.is_object() || value.is_null()) return;
    if (const json* rules = Child(schema, "x-kubernetes-validations"); rules && rules->is_array()) {
      RunRules(*rules, value, old, schema, path, root);
    }
    if (value.is_object()) {
      const json* properties = Child(schema, "properties");
      const json* additional = Child(schema, "additionalProperties");
      for (const auto& [key, child] : value.items()) {
        if (root && (key == "metadata" || key == "apiVersion" || key == "kind")) continue;
        const json* old_child = old && old->is_object() && old->contains(key) ? &(*old)[key] : nullptr;
        if (properties && properties->is_object() && properties->contains(key)) {
          Walk(child, old_child, (*properties)[key], JoinField(path, key), false);
        } else if (additional && additional->is_object()) {
          Walk(child, old_child, *additional, path + "[" + key + "]", false);
        }
      }
    } else if (value.is_array()) {
      const json* items = Child(schema, "items");
      if (!items) return;
      for (size_t i = 0; i < value.size(); ++i) {
        Walk(value[i], CorrelatedListItem(value[i], old, schema), *items, path + "[" + std::to_string(i) + "]", false);
      }
    }
  }

 private:
  // Only items of x-kubernetes-list-type: map lists correlate with the old list (by their keys),
  // as in kube-apiserver; items of other lists have no oldSelf.
  static const json* CorrelatedListItem(const json& item, const json* old, const json& schema) {
    if (!old || !old->is_array() || !item.is_object()) return nullptr;
    const json* type = Child(schema, "x-kubernetes-list-type");
    const json* keys = Child(schema, "x-kubernetes-list-map-keys");
    if (!type || *type != "map" || !keys || !keys->is_array() || keys->empty()) return nullptr;
    for (const auto& candidate : *old) {
      if (!candidate.is_object()) continue;
      bool same = true;
      for (const auto& k : *keys) {
        if (!k.is_string()) return nullptr;
        const std::string key = k.get<std::string>();
        if (item.value(key, json()) != candidate.value(key, json())) {
          same = false;
          break;
        }
      }
      if (same) return &candidate;
    }
    return nullptr;
  }

  void RunRules(const json& rules, const json& value, const json* old, const json& schema, const std::string& path, bool root) {
    const std::string field = path.empty() ? "<nil>" : path;
    const json* type = Child(schema, "type");
    const std::string type_name = type && type->is_string() ? type->get<std::string>() : "object";
    auto fail = [&](const std::string& message) { errors_->push_back(field + ": Invalid value: \"" + type_name + "\": " + message); };
    bool converted = false;
    Value self, old_self;
    for (const auto& rule : rules) {
      if (!rule.is_object() || !rule.contains("rule") || !rule["rule"].is_string()) continue;
      const std::string text = rule["rule"].get<std::string>();
      auto program = Program::CompileCached(text);
      if (!program.ok()) {
        // Rules that do not compile were refused with the CRD; a function we lack is skipped.
        LogUnsupportedOnce(text, program.status().message());
        continue;
      }
      if ((*program)->uses_old_self() && (!old || old->is_null())) continue;  // transition rule, no old value
      if (!converted) {
        self = FromJson(value, &schema, root);
        if (old && !old->is_null()) old_self = FromJson(*old, &schema, root);
        converted = true;
      }
      const uint64_t remaining = kPerRequestCostBudget - spent_;
      const uint64_t limit = std::min(kPerCallCostLimit, remaining);
      uint64_t used = 0;
      auto result = (*program)->Evaluate(self, (*program)->uses_old_self() ? &old_self : nullptr, limit, &used);
      spent_ += std::min(used, remaining);
      // kube-apiserver's wording for each outcome (apiextensions-apiserver schema/cel/validation.go).
      if (!result.ok()) {
        const std::string& err = result.status().message();
        if (result.status().code() == StatusCode::kResourceExhausted) {
          out_of_budget_ = true;  // no further rules run, anywhere in the object
          if (limit < kPerCallCostLimit) {
            fail("validation failed due to running out of cost budget, no further validation rules will be run");
          } else {
            fail("'" + err + "': no further validation rules will be run due to call cost exceeds limit for rule: " + RuleErrorString(rule));
          }
          return;
        }
        if (err.rfind("no such overload", 0) == 0) {
          fail("'" + err + "': call arguments did not match a supported operator, function or macro signature for rule: " + RuleErrorString(rule));
        } else {
          fail(err + " evaluating rule: " + RuleErrorString(rule));
        }
        continue;
      }
      if (result->kind() != Value::Kind::kBool || !result->bool_value()) fail(RuleMessageOrDefault(rule));
    }
  }

  std::vector<std::string>* errors_;
  uint64_t spent_ = 0;
  bool out_of_budget_ = false;
};

void CheckNode(const json& schema, const std::string& path, int depth, std::vector<std::string>* errors) {
  if (!schema.is_object() || depth > 64) return;
  if (const json* rules = Child(schema, "x-kubernetes-validations")) {
    const std::string where = path + ".x-kubernetes-validations";
    if (!rules->is_array()) {
      errors->push_back(where + ": Invalid value: " + rules->dump() + ": must be a list of rules");
    } else {
      for (size_t i = 0; i < rules->size(); ++i) {
        const json& rule = (*rules)[i];
        const std::string at = where + "[" + std::to_string(i) + "]";
        if (!rule.is_object() || !rule.contains("rule") || !rule["rule"].is_string() || Trim(rule["rule"].get<std::string>()).empty()) {
          errors->push_back(at + ".rule: Required value");
          continue;
        }
        if (rule.contains("message") && (!rule["message"].is_string())) {
          errors->push_back(at + ".message: Invalid value: " + rule["message"].dump() + ": must be a string");
        }
        auto program = Program::CompileCached(rule["rule"].get<std::string>());
        if (!program.ok() && program.status().code() == StatusCode::kInvalidArgument) {
          errors->push_back(at + ".rule: Invalid value: " + json(rule["rule"]).dump() + ": " + program.status().message());
        } else if (!program.ok()) {
          LogUnsupportedOnce(rule["rule"].get<std::string>(), program.status().message());
        }
      }
    }
  }
  if (const json* properties = Child(schema, "properties"); properties && properties->is_object()) {
    for (const auto& [key, child] : properties->items()) CheckNode(child, path + ".properties[" + key + "]", depth + 1, errors);
  }
  if (const json* items = Child(schema, "items")) CheckNode(*items, path + ".items", depth + 1, errors);
  if (const json* additional = Child(schema, "additionalProperties")) CheckNode(*additional, path + ".additionalProperties", depth + 1, errors);
}

}  // namespace

std::vector<std::string> CheckValidationRules(const json& schema, const std::string& path) {
  std::vector<std::string> errors;
  CheckNode(schema, path, 0, &errors);
  return errors;
}

std::vector<std::string> EvaluateValidationRules(const json& object, const json* old, const json& schema) {
  std::vector<std::string> errors;
  RuleWalker(&errors).Walk(object, old, schema, "", true);
  return errors;
}

}  // namespace mf::local::cel
