#include "runtime/kernel.h"

namespace mf::runtime {

void KernelRegistry::Register(KernelDef def) {
  std::string op = def.op_type;
  defs_[op] = std::move(def);
}

const KernelDef* KernelRegistry::Find(const std::string& op_type, int64_t opset) const {
  auto it = defs_.find(op_type);
  if (it == defs_.end() || opset < it->second.since_opset) return nullptr;
  return &it->second;
}

std::vector<const KernelDef*> KernelRegistry::List() const {
  std::vector<const KernelDef*> out;
  for (const auto& [name, def] : defs_) out.push_back(&def);
  return out;
}

}  // namespace mf::runtime
