#include "runtime/cpu/dnnl_engine.h"

#include <algorithm>
#include <memory>

namespace mf::runtime::cpu {

dnnl::engine& CpuEngine() {
  static dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);  // never destroyed
  return *engine;
}

dnnl::stream& ThreadStream() {
  thread_local dnnl::stream stream(CpuEngine());
  return stream;
}

void Execute(const dnnl::primitive& primitive, std::initializer_list<std::pair<int, const dnnl::memory*>> args) {
  dnnl_exec_arg_t c_args[16];
  int n = 0;
  for (const auto& [kind, mem] : args) {
    if (mem == nullptr || !*mem) continue;  // an absent optional argument (bias, residual)
    if (n == 16) throw dnnl::error(dnnl_invalid_arguments, "more than 16 primitive arguments");
    c_args[n++] = {kind, mem->get()};
  }
  dnnl::error::wrap_c_api(dnnl_primitive_execute(primitive.get(), ThreadStream().get(), n, c_args),
                          "could not execute a primitive");
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

StatusOr<dnnl::memory> TemporaryMemory(const dnnl::memory::desc& md, Tensor* holder) {
  MF_ASSIGN_OR_RETURN(*holder, Tensor::AllocateUninitialized(DataType::kUInt8, {static_cast<int64_t>(md.get_size())}));
  return dnnl::memory(md, CpuEngine(), holder->raw_data());
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
