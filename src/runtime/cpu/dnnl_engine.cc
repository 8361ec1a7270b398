#include "runtime/cpu/dnnl_engine.h"

namespace mf::runtime::cpu {

dnnl::engine& CpuEngine() {
  static dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);  // never destroyed
  return *engine;
}

Status DnnlError(const dnnl::error& e, const std::string& what) {
  return InvalidArgument(what + ": oneDNN refused it (" + std::string(e.what()) + ")");
}

}  // namespace mf::runtime::cpu
