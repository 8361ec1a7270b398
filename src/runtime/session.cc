#include "runtime/session.h"

#include <omp.h>

#include "common/logging.h"
#include "runtime/backend.h"
#include "runtime/execution_plan.h"
#include "runtime/graph/model_loader.h"
#include "runtime/passes/passes.h"
#ifdef MODELFLEET_HAVE_CUDA
#include "runtime/cuda/cuda_plan.h"
#include "runtime/cuda/pinned_host.h"
#endif

namespace mf::runtime {

int Signature::InputIndex(std::string_view name) const {
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

int Signature::OutputIndex(std::string_view name) const {
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

class Session::Impl {
 public:
  SessionOptions options;
  Signature signature;
  std::unique_ptr<ExecutionPlan> plan;  // Backend::kCpu
#ifdef MODELFLEET_HAVE_CUDA
  std::unique_ptr<cuda::CudaPlan> cuda_plan;  // Backend::kCuda
#endif
  size_t arena_bytes = 0;
  bool warmed_up = false;
  NodePlacement placement;

  Status RunPlan(const std::vector<const Tensor*>& inputs, std::vector<Tensor>* outputs, size_t* peak) const {
#ifdef MODELFLEET_HAVE_CUDA
    if (cuda_plan) return cuda_plan->Run(inputs, outputs);
#endif
    // Unreachable after Build(), but without CUDA gcc proves the warm-up's branch reaches here
    // with no plan and refuses the call (-Werror=nonnull).
    if (!plan) return Internal("the session has no execution plan");
    return plan->Run(inputs, outputs, peak);
  }

  Status CheckInputs(const std::vector<const Tensor*>& inputs) const {
    if (inputs.size() != signature.inputs.size()) {
      return InvalidArgument("the model takes " + std::to_string(signature.inputs.size()) + " inputs, got " +
                             std::to_string(inputs.size()));
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      const TensorInfo& info = signature.inputs[i];
      const Tensor* t = inputs[i];
      if (!t) return InvalidArgument("input '" + info.name + "' is missing");
      if (t->dtype() != info.dtype) {
        return InvalidArgument("input '" + info.name + "' must be " + std::string(DataTypeName(info.dtype)) + ", got " +
                               std::string(DataTypeName(t->dtype())));
      }
      if (!declared_rank_[i]) continue;  // the model declares no shape: any shape is accepted
      if (t->shape().size() != info.shape.size()) {
        return InvalidArgument("input '" + info.name + "' must have shape " + ShapeToString(info.shape) + ", got " +
                               ShapeToString(t->shape()));
      }
      for (size_t d = 0; d < info.shape.size(); ++d) {
        if (info.shape[d] >= 0 && info.shape[d] != t->shape()[d]) {
          return InvalidArgument("input '" + info.name + "' must have shape " + ShapeToString(info.shape) + ", got " +
                                 ShapeToString(t->shape()));
        }
      }
    }
    return Status::Ok();
  }

  std::vector<bool> declared_rank_;  // per input: whether the model declared a shape at all
};

namespace {

// Builds a zero-filled batch-1 example of each input (symbolic dims = 1), to measure the
// activation arena. nullopt when an input's rank is unknown.
// Models whose declared inputs are larger than this skip the warm-up: loading must not allocate
// what a (possibly hostile) file merely declares.
constexpr int64_t kMaxWarmupInputBytes = int64_t{64} << 20;

// Sets the calling thread's OpenMP team size for a scope (an OpenMP setting is per thread, so
// other threads' runs are unaffected). n <= 0 leaves it as it is.
class ScopedOmpThreads {
 public:
  explicit ScopedOmpThreads(int n) : saved_(omp_get_max_threads()) {
    if (n > 0) omp_set_num_threads(n);
  }
  ~ScopedOmpThreads() { omp_set_num_threads(saved_); }
  ScopedOmpThreads(const ScopedOmpThreads&) = delete;
  ScopedOmpThreads& operator=(const ScopedOmpThreads&) = delete;

 private:
  int saved_;
};

std::optional<std::vector<Tensor>> ExampleInputs(const Signature& sig, const std::vector<bool>& declared) {
  std::vector<Tensor> out;
  int64_t total = 0;
  for (size_t i = 0; i < sig.inputs.size(); ++i) {
    if (!declared[i] || sig.inputs[i].dtype == DataType::kString) return std::nullopt;
    Shape s = sig.inputs[i].shape;
    for (int64_t& d : s) d = d < 0 ? 1 : d;
    int64_t n = NumElements(s);
    if (n < 0 || n > kMaxWarmupInputBytes) return std::nullopt;
    total += n * static_cast<int64_t>(ElementSize(sig.inputs[i].dtype));
    if (total > kMaxWarmupInputBytes) return std::nullopt;
    auto t = Tensor::Allocate(sig.inputs[i].dtype, s);
    if (!t.ok()) return std::nullopt;
    out.push_back(std::move(t).value());
  }
  return out;
}

}  // namespace

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Session::~Session() = default;

StatusOr<std::unique_ptr<Session::Impl>> Session::Build(Graph graph, const SessionOptions& options) {
  // Constants are folded on the host whatever the backend.
  MF_ASSIGN_OR_RETURN(const KernelRegistry* registry, KernelsFor(Backend::kCpu));
  if (options.threads < 0) return InvalidArgument("threads must be >= 0");
  const bool cuda = options.backend == Backend::kCuda;
#ifndef MODELFLEET_HAVE_CUDA
  if (cuda) return Unavailable("this build of the runtime has no CUDA backend (built without a CUDA toolkit)");
#endif

  auto impl = std::make_unique<Impl>();
  impl->options = options;
  for (int v : graph.inputs) {
    const Value& val = graph.values[static_cast<size_t>(v)];
    impl->signature.inputs.push_back({val.name, val.dtype, val.shape.value_or(Shape{})});
    impl->declared_rank_.push_back(val.shape.has_value());
  }
  {
    // The rewrites run once per load on throw-away kernels: one thread does them, so a load
    // leaves the other cores to the models already serving (the server's load thread is
    // SCHED_IDLE too, but memory bandwidth and caches are shared whatever the priority).
    ScopedOmpThreads one(1);
    MF_RETURN_IF_ERROR(FoldConstants(&graph, *registry, options.optimize));
    if (options.optimize) {
      FuseConvBatchNorm(&graph);
      FuseConvAdd(&graph);
      if (!cuda) {  // the CUDA backend has no biased or strided MatMul nor Gelu kernel yet
        FuseMatMulBias(&graph);
        FuseGelu(&graph);
        FuseMatMulTransposes(&graph);
      }
      FuseActivations(&graph, /*gelu=*/!cuda);
      RemoveDeadNodes(&graph);
      AssignChannelsLast(&graph);
    }
  }
  for (int v : graph.outputs) {
    const Value& val = graph.values[static_cast<size_t>(v)];
    impl->signature.outputs.push_back({val.name, val.dtype, val.shape.value_or(Shape{})});
  }
#ifdef MODELFLEET_HAVE_CUDA
  if (cuda) {
    MF_ASSIGN_OR_RETURN(impl->cuda_plan, cuda::CudaPlan::Create(std::move(graph), options));
    impl->placement = impl->cuda_plan->placement();
  }
#endif
  if (!cuda) {
    MF_ASSIGN_OR_RETURN(impl->plan, ExecutionPlan::Create(std::move(graph), *registry));
    impl->placement.host = static_cast<int>(impl->plan->graph().nodes.size());
  }

  // One batch-1 run measures the activation arena (CPU) and warms the per-shape caches (cuDNN
  // and cuBLASLt plans on the GPU), so the first request does not pay for them.
  // A model that cannot run on zeros (e.g. data-dependent shapes) is still served; its arena is
  // then unknown and not counted.
  // It runs with the team size requests get (Run()'s): oneDNN fixes a primitive's thread count
  // when it is created, and the kernels keep the primitives this run creates for requests of
  // the same shape, so a one-thread warm-up would leave batch-1 requests on one thread.
  if (auto example = ExampleInputs(impl->signature, impl->declared_rank_)) {
    ScopedOmpThreads serving(options.threads);
    std::vector<const Tensor*> ptrs;
    for (const Tensor& t : *example) ptrs.push_back(&t);
    std::vector<Tensor> outs;
    // On the CPU the warm-up also drops the graph's plain copy of weights a kernel packed.
    Status s = impl->plan ? impl->plan->WarmUp(ptrs, &outs, &impl->arena_bytes)
                          : impl->RunPlan(ptrs, &outs, &impl->arena_bytes);
    impl->warmed_up = s.ok();
    if (!s.ok()) {
      impl->arena_bytes = 0;
      // Expected for models whose inputs are shapes or indices; not a load failure.
      log::Info("runtime: warm-up run on zero inputs failed; memory_bytes() counts weights only",
                {{"error", s.ToString()}});
    }
  }
  return impl;
}

StatusOr<std::unique_ptr<Session>> Session::Load(const std::string& model_path, const SessionOptions& options) {
  MF_ASSIGN_OR_RETURN(Graph graph, LoadModelFile(model_path));
  auto impl = Build(std::move(graph), options);
  if (!impl.ok()) return impl.status().WithContext(model_path);
  return std::unique_ptr<Session>(new Session(std::move(impl).value()));
}

StatusOr<std::unique_ptr<Session>> Session::LoadFromBytes(std::string_view model_bytes, const std::string& model_dir,
                                                          const SessionOptions& options) {
  MF_ASSIGN_OR_RETURN(Graph graph, LoadModelBytes(model_bytes, model_dir));
  MF_ASSIGN_OR_RETURN(std::unique_ptr<Impl> impl, Build(std::move(graph), options));
  return std::unique_ptr<Session>(new Session(std::move(impl)));
}

const Signature& Session::signature() const { return impl_->signature; }
const SessionOptions& Session::options() const { return impl_->options; }
const NodePlacement& Session::placement() const { return impl_->placement; }

Status Session::Run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>* outputs) const {
  MF_RETURN_IF_ERROR(impl_->CheckInputs(inputs));
  if (impl_->options.threads > 0) omp_set_num_threads(impl_->options.threads);
  std::vector<Tensor> result;
  MF_RETURN_IF_ERROR(impl_->RunPlan(inputs, &result, nullptr));
  *outputs = std::move(result);
  return Status::Ok();
}

Status Session::RunTimed(const std::vector<const Tensor*>& inputs, std::vector<Tensor>* outputs,
                         std::vector<NodeTime>* times) const {
  MF_RETURN_IF_ERROR(impl_->CheckInputs(inputs));
  if (!impl_->plan) return Unimplemented("per-node timing is available on the CPU backend only");
  if (impl_->options.threads > 0) omp_set_num_threads(impl_->options.threads);
  std::vector<size_t> nodes;
  std::vector<double> seconds;
  std::vector<Tensor> result;
  MF_RETURN_IF_ERROR(impl_->plan->RunTimed(inputs, &result, &nodes, &seconds));
  times->clear();
  const Graph& graph = impl_->plan->graph();
  for (size_t i = 0; i < nodes.size(); ++i) {
    times->push_back({graph.nodes[nodes[i]].op_type, graph.nodes[nodes[i]].name, seconds[i]});
  }
  *outputs = std::move(result);
  return Status::Ok();
}

StatusOr<Tensor> Session::AllocateInput(DataType dtype, Shape shape) const {
#ifdef MODELFLEET_HAVE_CUDA
  if (impl_->cuda_plan && dtype != DataType::kString) return cuda::AllocatePinnedHost(dtype, std::move(shape));
#endif
  return Tensor::AllocateUninitialized(dtype, std::move(shape));
}

bool Session::warmed_up() const { return impl_->warmed_up; }

size_t Session::memory_bytes() const {
#ifdef MODELFLEET_HAVE_CUDA
  if (impl_->cuda_plan) return impl_->cuda_plan->constant_bytes();  // device memory of the weights
#endif
  return impl_->plan->constant_bytes() + impl_->plan->kernel_owned_bytes() + impl_->arena_bytes;
}

}  // namespace mf::runtime
