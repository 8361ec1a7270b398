#include "tools/run/ops_table.h"

#include "runtime/graph/model_loader.h"

namespace mf::runtime {

std::string RenderOpsTable(const KernelRegistry& registry, const std::string& backend_name) {
  std::string out = "| operator | opsets | element types |\n|---|---|---|\n";
  size_t n = 0;
  for (const KernelDef* def : registry.List()) {
    out += "| " + def->op_type + " | " + std::to_string(std::max(def->since_opset, kMinOpset)) + "–" +
           std::to_string(kMaxOpset) + " | " + def->types + " |\n";
    ++n;
  }
  out += "\n" + std::to_string(n) + " operators on the " + backend_name + " backend.\n";
  return out;
}

}  // namespace mf::runtime
