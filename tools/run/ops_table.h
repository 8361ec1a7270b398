// The table of operators a backend supports, rendered from its kernel registry (so
// docs/ops.md is generated, never hand-maintained).
#pragma once

#include <string>

#include "runtime/kernel.h"

namespace mf::runtime {

// A Markdown table: op, since opset, element types.
std::string RenderOpsTable(const KernelRegistry& registry, const std::string& backend_name);

}  // namespace mf::runtime
