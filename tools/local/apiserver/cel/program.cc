#include "tools/local/apiserver/cel/program.h"

#include <mutex>
#include <unordered_map>
#include <vector>

#include "tools/local/apiserver/cel/parser.h"

namespace mf::local::cel {
namespace {

// Walks the AST as cel-go's checker would for what matters here: every identifier is a variable
// in scope or a type name, every call is a function we implement.
Status Check(const Expr& e, std::vector<std::string>& scope, bool* uses_old_self) {
  switch (e.kind) {
    case Expr::Kind::kIdent:
      if (e.name == "oldSelf") *uses_old_self = true;
      for (const auto& name : scope) {
        if (name == e.name) return Status::Ok();
      }
      if (IsTypeName(e.name)) return Status::Ok();
      return InvalidArgument("compilation failed: ERROR: <input>:1:" + std::to_string(e.offset + 1) +
                             ": undeclared reference to '" + e.name + "'");
    case Expr::Kind::kCall:
      if (!IsSupportedFunction(e.name, e.receiver_style, e.args.size())) {
        return Unimplemented("function '" + e.name + "' with " + std::to_string(e.args.size()) +
                             " argument(s) is not supported by this CEL evaluator");
      }
      break;
    case Expr::Kind::kComprehension: {
      MF_RETURN_IF_ERROR(Check(*e.args[0], scope, uses_old_self));
      scope.push_back(e.var);
      Status s = Status::Ok();
      for (size_t i = 1; i < e.args.size() && s.ok(); ++i) s = Check(*e.args[i], scope, uses_old_self);
      scope.pop_back();
      return s;
    }
    default: break;
  }
  for (const auto& a : e.args) MF_RETURN_IF_ERROR(Check(*a, scope, uses_old_self));
  return Status::Ok();
}

}  // namespace

StatusOr<std::shared_ptr<const Program>> Program::Compile(std::string_view source) {
  auto parsed = Parse(source);
  if (!parsed.ok()) return InvalidArgument("compilation failed: " + parsed.status().message());
  auto program = std::shared_ptr<Program>(new Program());
  program->source_ = std::string(source);
  program->expr_ = std::move(parsed).value();
  std::vector<std::string> scope = {"self", "oldSelf"};
  MF_RETURN_IF_ERROR(Check(*program->expr_, scope, &program->uses_old_self_));
  return std::shared_ptr<const Program>(std::move(program));
}

StatusOr<std::shared_ptr<const Program>> Program::CompileCached(const std::string& source) {
  static std::mutex mu;
  static std::unordered_map<std::string, StatusOr<std::shared_ptr<const Program>>> cache;
  {
    std::lock_guard lock(mu);
    auto it = cache.find(source);
    if (it != cache.end()) return it->second;
  }
  auto compiled = Compile(source);
  std::lock_guard lock(mu);
  if (cache.size() >= 4096) cache.clear();  // bounded: rule texts come from users
  cache.emplace(source, compiled);
  return compiled;
}

StatusOr<Value> Program::Evaluate(const Value& self, const Value* old_self, uint64_t cost_limit, uint64_t* cost_used) const {
  std::vector<Binding> vars;
  vars.push_back({"self", self});
  if (old_self) vars.push_back({"oldSelf", *old_self});
  CostTracker cost(cost_limit);
  Value result = cel::Evaluate(*expr_, vars, &cost);
  if (cost_used) *cost_used = cost.used();
  if (cost.exceeded()) return ResourceExhausted("operation cancelled: actual cost limit exceeded");
  if (result.is_error()) return InvalidArgument(result.text());
  return result;
}

}  // namespace mf::local::cel
