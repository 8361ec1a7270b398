// The parsed form of a CEL expression. Operators are calls of cel-spec's internal names
// ("_+_", "_<_", "!_", "-_", "_[_]", "@in"); && || and ?: have their own kinds because they are
// not strict in their arguments; macros (has, all, exists, exists_one, map, filter) are
// expanded by the parser into kHas and kComprehension nodes.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "tools/local/apiserver/cel/value.h"

namespace mf::local::cel {

struct Expr {
  enum class Kind {
    kLiteral,        // literal
    kIdent,          // name
    kSelect,         // args[0].name
    kHas,            // has(args[0].name)
    kCall,           // name(args...), or args[0].name(args[1...]) when receiver_style
    kAnd,            // args[0] && args[1]
    kOr,             // args[0] || args[1]
    kConditional,    // args[0] ? args[1] : args[2]
    kList,           // [args...]
    kMap,            // {args[0]: args[1], args[2]: args[3], ...}
    kComprehension,  // args[0].name(var, args[1] [, args[2]]): all, exists, exists_one, map, filter
  };
  Kind kind = Kind::kLiteral;
  Value literal;
  std::string name;
  std::string var;  // kComprehension: the iteration variable
  bool receiver_style = false;
  std::vector<std::unique_ptr<Expr>> args;
  size_t offset = 0;  // in the source, for messages
  int depth = 1;      // 1 + the deepest argument: bounds the evaluator's recursion
};

}  // namespace mf::local::cel
