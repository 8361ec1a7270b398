// Evaluates a parsed CEL expression over values. CEL errors (no such key, overflow, no matching
// overload) are values so that && || and the all/exists macros can absorb them as CEL does;
// running out of cost budget is not: it aborts the evaluation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tools/local/apiserver/cel/ast.h"
#include "tools/local/apiserver/cel/value.h"

namespace mf::local::cel {

// Cost in the spirit of cel-go's runtime cost: one unit per evaluated node and per macro
// iteration, plus a share of the bytes or elements touched by string, regex and list work.
class CostTracker {
 public:
  explicit CostTracker(uint64_t limit) : limit_(limit) {}
  // False (and sticky) once the limit is passed.
  bool Add(uint64_t units) {
    used_ += units;
    if (used_ > limit_) exceeded_ = true;
    return !exceeded_;
  }
  bool exceeded() const { return exceeded_; }
  uint64_t used() const { return used_; }

 private:
  uint64_t limit_;
  uint64_t used_ = 0;
  bool exceeded_ = false;
};

struct Binding {
  std::string name;
  Value value;
};

// The function names (receiver style or global, as cel-spec and the Kubernetes list library
// define them) that Evaluate implements; a compiled rule using any other is not supported.
bool IsSupportedFunction(const std::string& name, bool receiver_style, size_t arg_count);
// The type identifiers an expression may name (int, string, list, ...).
bool IsTypeName(const std::string& name);

// The value of `expr`, with `vars` in scope (searched from the back). When the tracker runs out
// the result is an error value and cost->exceeded() is true.
Value Evaluate(const Expr& expr, std::vector<Binding>& vars, CostTracker* cost);

}  // namespace mf::local::cel
