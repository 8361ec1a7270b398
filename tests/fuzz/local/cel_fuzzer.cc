// libFuzzer entry point for the CEL evaluator of CRD validation rules (x-kubernetes-validations),
// whose expressions come from users who create CRDs, evaluated over objects from users who create
// custom resources. Input: the expression, optionally followed by a NUL byte and a JSON document
// that becomes `self` (and `oldSelf`). Every input must compile to a program or to an error
// message, and evaluate under the cost limit to a value or an error, never crash or run away.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "tools/local/apiserver/cel/json_value.h"
#include "tools/local/apiserver/cel/program.h"
#include "tools/local/apiserver/cel/rules.h"

namespace {

void Check(bool invariant) {
  if (!invariant) std::abort();
}

constexpr uint64_t kCostLimit = 200000;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using nlohmann::json;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = std::min(input.find('\0'), size);
  const std::string expression(input.substr(0, nul));
  json self = {{"name", "fuzz"}, {"replicas", 3}, {"items", {1, 2, 3}}, {"labels", {{"a", "b"}}}};
  if (nul < size) {
    self = json::parse(input.substr(nul + 1), nullptr, /*allow_exceptions=*/false);
    if (self.is_discarded()) return 0;
  }

  auto program = mf::local::cel::Program::Compile(expression);
  if (!program.ok()) {
    Check(!program.status().message().empty());
    return 0;
  }
  const mf::local::cel::Value value = mf::local::cel::FromJson(self, nullptr);
  uint64_t used = 0;
  auto result = (*program)->Evaluate(value, &value, kCostLimit, &used);
  Check(used > 0);
  if (!result.ok()) {
    Check(!result.status().message().empty());
    if (result.status().code() == mf::StatusCode::kResourceExhausted) Check(used > kCostLimit);
  } else {
    Check(used <= kCostLimit);
  }

  // The same rule attached to a schema node, as custom resource validation runs it (only for
  // cheap rules: the walker's limits are kube-apiserver's, far above kCostLimit).
  // (Deeply nested documents are left out: copying one into the object recurses per level.)
  if (result.ok() && used < kCostLimit / 10 && size - nul < 4096) {
    const json schema = {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true},
                         {"x-kubernetes-validations", {{{"rule", expression}}}}};
    const json object = self.is_object() ? self : json{{"value", self}};
    auto errors = mf::local::cel::EvaluateValidationRules(object, &object, schema);
    for (const auto& e : errors) Check(!e.empty());
  }
  return 0;
}
