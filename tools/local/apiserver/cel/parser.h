// A recursive-descent parser for CEL's expression grammar (cel-spec): ternary, || && with
// relations (== != < <= > >= in), + - * / %, unary ! and -, member selection, indexing, calls,
// list and map literals, with the standard macros expanded. Nesting is bounded so that
// user-written expressions cannot exhaust the stack while parsing or evaluating.
#pragma once

#include <memory>
#include <string_view>

#include "common/status.h"
#include "tools/local/apiserver/cel/ast.h"

namespace mf::local::cel {

// cel-go's default parser recursion limit.
inline constexpr int kMaxNestingDepth = 250;
inline constexpr size_t kMaxExpressionLength = 100 * 1024;

// INVALID_ARGUMENT "Syntax error at <offset>: ..." when the text is not a CEL expression.
StatusOr<std::unique_ptr<Expr>> Parse(std::string_view source);

}  // namespace mf::local::cel
