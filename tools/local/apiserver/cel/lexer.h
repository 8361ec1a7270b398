// Splits a CEL expression into tokens (cel-spec's lexical grammar: decimal / hex int and uint
// literals, doubles with exponents, single / double / triple-quoted and raw strings, bytes,
// identifiers, reserved words and operators). Literal tokens carry their decoded value.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "tools/local/apiserver/cel/value.h"

namespace mf::local::cel {

struct Token {
  enum class Kind { kIdent, kLiteral, kPunct, kEnd };
  Kind kind;
  std::string text;  // identifier, punctuation ("&&", "["), or the literal's source
  Value literal;     // kLiteral only
  size_t offset = 0;
  // An int literal too large for int64 that only fits as the operand of unary minus
  // (-9223372036854775808).
  bool int_min_magnitude = false;
};

// The tokens of `source`, ending with kEnd; INVALID_ARGUMENT with the offset on a bad token.
StatusOr<std::vector<Token>> Tokenize(std::string_view source);

}  // namespace mf::local::cel
