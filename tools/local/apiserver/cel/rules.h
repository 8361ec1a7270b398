// CRD validation rules (x-kubernetes-validations) as kube-apiserver applies them: each rule
// attaches to the schema node that carries it and sees that node's value as `self`; transition
// rules (using oldSelf) run only on update, where the old object has a value at the same place.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mf::local::cel {

// At CRD create/update: every rule in `schema` (found at `path`, e.g.
// "spec.versions[0].schema.openAPIV3Schema") must compile. Returns "field: message" errors for
// rules that do not parse or reference undeclared names. Rules calling a function this evaluator
// lacks are accepted (kube-apiserver would run them; here they are logged and skipped).
std::vector<std::string> CheckValidationRules(const nlohmann::json& schema, const std::string& path);

// At custom resource create/update/patch/apply/status: every violated rule as
// "<path>: Invalid value: \"<type>\": <message>" ("<nil>" for the root, as kube-apiserver), in
// kube-apiserver's wording, including its cost-limit messages. `old` is null on create.
std::vector<std::string> EvaluateValidationRules(const nlohmann::json& object, const nlohmann::json* old,
                                                 const nlohmann::json& schema);

}  // namespace mf::local::cel
