// A compiled CEL validation rule: parsed once, checked against what this evaluator supports,
// then evaluated with `self` (and `oldSelf` for transition rules) bound. Compiled rules are
// cached by their text, as kube-apiserver compiles a CRD's rules once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "tools/local/apiserver/cel/ast.h"
#include "tools/local/apiserver/cel/interpreter.h"
#include "tools/local/apiserver/cel/value.h"

namespace mf::local::cel {

// kube-apiserver's limits: PerCallLimit for one rule, RuntimeCELCostBudget for one request.
inline constexpr uint64_t kPerCallCostLimit = 1000000;
inline constexpr uint64_t kPerRequestCostBudget = 10000000;

class Program {
 public:
  // INVALID_ARGUMENT when the text does not parse or names an undeclared variable (kube-apiserver
  // refuses such a CRD); UNIMPLEMENTED when it calls a function this evaluator lacks.
  static StatusOr<std::shared_ptr<const Program>> Compile(std::string_view source);
  // Compile() behind a bounded, thread-safe cache keyed by the text.
  static StatusOr<std::shared_ptr<const Program>> CompileCached(const std::string& source);

  // True when the rule mentions oldSelf: a transition rule, evaluated only on update.
  bool uses_old_self() const { return uses_old_self_; }
  const std::string& source() const { return source_; }

  // The rule's value. RESOURCE_EXHAUSTED "call cost exceeds limit" when the evaluation passes
  // `cost_limit`; INVALID_ARGUMENT with CEL's message on an evaluation error. `cost_used`, when
  // given, receives the cost spent (also when it fails).
  StatusOr<Value> Evaluate(const Value& self, const Value* old_self, uint64_t cost_limit = kPerCallCostLimit,
                           uint64_t* cost_used = nullptr) const;

 private:
  std::string source_;
  std::unique_ptr<Expr> expr_;
  bool uses_old_self_ = false;
};

}  // namespace mf::local::cel
