#include "runtime/cpu/dnnl_engine.h"

#include <algorithm>
#include <memory>

namespace mf::runtime::cpu {

dnnl::engine& CpuEngine() {
  static dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);  // never destroyed
  return *engine;
}

uint8_t* ThreadScratchpad(size_t bytes) {
  thread_local std::unique_ptr<uint8_t[]> buffer;
  thread_local size_t capacity = 0;
  if (bytes > capacity || !buffer) {
    capacity = std::max<size_t>(bytes, 64);
    buffer.reset();  // the old one first: never both at once
    buffer.reset(new uint8_t[capacity]);
  }
  return buffer.get();
}

void AppendActivation(const ActivationParams& act, dnnl::post_ops& ops) {
  dnnl::algorithm alg = dnnl::algorithm::undef;
  float alpha = act.alpha, beta = act.beta;
  switch (act.kind) {
    case Activation::kNone:
      return;
    case Activation::kRelu:
      alg = dnnl::algorithm::eltwise_relu;
      alpha = 0.f;
      break;
    case Activation::kLeakyRelu:
      alg = dnnl::algorithm::eltwise_relu;  // alpha: the negative slope
      break;
    case Activation::kSigmoid:
      alg = dnnl::algorithm::eltwise_logistic;
      break;
    case Activation::kTanh:
      alg = dnnl::algorithm::eltwise_tanh;
      break;
    case Activation::kClip:
      alg = dnnl::algorithm::eltwise_clip;
      break;
    case Activation::kGelu:
      alg = dnnl::algorithm::eltwise_gelu_erf;
      break;
  }
  ops.append_eltwise(1.f, alg, alpha, beta);
}

Status DnnlError(const dnnl::error& e, const std::string& what) {
  return InvalidArgument(what + ": oneDNN refused it (" + std::string(e.what()) + ")");
}

}  // namespace mf::runtime::cpu
