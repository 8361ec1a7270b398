// JSON -> CEL values as kube-apiserver's CEL sees a custom resource: an object is a map, an
// array a list, a number an int or a double according to the schema's type ("integer" /
// "number"), so that `self.ratio * 2.0` works on a whole-number ratio.
#pragma once

#include <nlohmann/json.hpp>

#include "tools/local/apiserver/cel/value.h"

namespace mf::local::cel {

// Deeper values become error values (reading them fails the rule) so that a hostile object
// cannot exhaust the stack.
inline constexpr int kMaxJsonDepth = 200;

// `schema` may be null or a non-object (no typing information: JSON's own number kinds).
// `root`: the object's root, whose metadata CEL sees only as name and generateName.
Value FromJson(const nlohmann::json& value, const nlohmann::json* schema, bool root = false);

}  // namespace mf::local::cel
