#include "runtime/cuda/cuda_plan.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <list>
#include <map>
#include <mutex>

#include "common/logging.h"
#include "runtime/backend.h"
#include "runtime/cuda/cublaslt_loader.h"
#include "runtime/cuda/cuda_common.h"
#include "runtime/cuda/device_memory.h"
#include "runtime/graph/bind.h"

namespace mf::runtime::cuda {
namespace {

enum class Where : uint8_t { kDevice, kShapeHost, kFallback };

struct Step {
  size_t node = 0;
  Where where = Where::kDevice;
  std::unique_ptr<Kernel> kernel;
  std::vector<bool> host_slot;  // per input of a device step: read on the host
  std::vector<bool> own_copy;   // per input of a device step: a constant the kernel keeps itself
  std::vector<int> release;     // values whose last reader is this step
};

// Page-locked host memory: the source or destination of copies a CUDA graph replays.
class PinnedBuffer {
 public:
  static StatusOr<std::unique_ptr<PinnedBuffer>> Create(size_t bytes) {
    auto b = std::unique_ptr<PinnedBuffer>(new PinnedBuffer());
    MF_CUDA_RETURN_IF_ERROR(cudaMallocHost(&b->data_, std::max<size_t>(bytes, 1)));
    b->bytes_ = bytes;
    return b;
  }
  ~PinnedBuffer() { cudaFreeHost(data_); }
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  PinnedBuffer() = default;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// One input signature on one context: how often it ran, and its CUDA graph once captured.
struct Captured {
  int runs = 0;
  bool failed = false;  // capture failed once: this signature runs eagerly from now on
  cudaGraphExec_t exec = nullptr;
  // Per graph input: device memory outside the graph that each replay fills with a plain copy
  // from the caller's tensor (no host-side staging copy; large batches spend most of their
  // transfer time there).
  std::vector<void*> device_inputs;
  std::vector<std::unique_ptr<PinnedBuffer>> output_staging;  // per graph output (device-computed)
  std::vector<std::pair<DataType, Shape>> output_meta;        // per graph output
  std::vector<std::shared_ptr<const Tensor>> host_outputs;    // outputs computed on the host
  std::vector<std::unique_ptr<PinnedBuffer>> uploads;         // host values the graph copies in
  ~Captured() {
    if (exec) cudaGraphExecDestroy(exec);
    for (void* p : device_inputs) FreeCounted(p);
  }
};

// A stream with its handles, owned by one run at a time.
struct Context {
  RunContext run;
  int* fault_host = nullptr;  // the fault word (mapped host memory; run.fault_word maps it)
  std::map<std::string, std::unique_ptr<Captured>> signatures;
  std::list<std::string> recent;  // most recent first, for eviction
  ~Context() {
    signatures.clear();
    if (fault_host) cudaFreeHost(fault_host);
    if (run.cublaslt) cublasLtDestroy(run.cublaslt);
    if (run.cudnn) cudnnDestroy(run.cudnn);
    if (run.stream) cudaStreamDestroy(run.stream);
  }
};

constexpr int kMaxContexts = 4;        // runs in flight at once per model
constexpr size_t kMaxSignatures = 16;  // captured graphs kept per context (LRU)

enum class Mode : uint8_t { kEager, kCapture };

bool IsShapeOp(const std::string& op) { return op == "Shape" || op == "Size"; }

void KeepBuffer(void*) {}  // a view of memory someone else owns

}  // namespace

class CudaPlan::Impl {
 public:
  SessionOptions options;
  Graph graph;                         // value dtypes are the model's (host) types
  std::vector<DataType> device_dtype;  // per value: its type in device memory
  std::vector<Step> steps;
  std::vector<std::shared_ptr<const Tensor>> device_constants;  // per value (nullptr: none)
  std::vector<bool> host_read_input;  // per graph input: read on the host (part of the signature)
  std::vector<bool> is_graph_input;   // per value
  bool capturable = true;
  size_t constant_bytes = 0;
  NodePlacement placement;

  mutable std::mutex pool_mu;
  mutable std::condition_variable pool_cv;
  mutable std::vector<std::unique_ptr<Context>> idle;
  mutable int contexts = 0;

  Status Bind(bool allow_channels_last);
  StatusOr<std::unique_ptr<Context>> Acquire() const;
  void Release(std::unique_ptr<Context> ctx) const;
  std::string Signature(const std::vector<const Tensor*>& inputs) const;
  Status Execute(Context& ctx, const std::vector<const Tensor*>& inputs, Mode mode, Captured* captured,
                 std::vector<Tensor>* outputs) const;
  Status Capture(Context& ctx, const std::vector<const Tensor*>& inputs, Captured* captured) const;
  Status Replay(Context& ctx, const std::vector<const Tensor*>& inputs, Captured* captured,
                std::vector<Tensor>* outputs) const;
  // The fault a kernel raised in the run that just finished on ctx's (idle) stream, as an error
  // naming the node; clears the word.
  Status TakeFault(Context& ctx) const;
};

namespace {

DataType Lower(DataType t, Precision precision) { return t == DataType::kFloat32 ? DeviceFloatType(precision) : t; }

// The values of one run: each may have a host copy, a device copy or both.
struct Frame {
  explicit Frame(size_t n) : host_owned(n), device_owned(n), host(n, nullptr), device(n, nullptr) {}
  std::vector<Tensor> host_owned, device_owned;
  std::vector<const Tensor*> host, device;
  void Drop(size_t v) {
    host_owned[v] = Tensor();
    device_owned[v] = Tensor();
    host[v] = nullptr;
    device[v] = nullptr;
  }
};

}  // namespace

Status CudaPlan::Impl::Bind(bool allow_channels_last) {
  Graph& g = graph;
  if (!allow_channels_last) {
    for (Value& v : g.values) v.nhwc = false;
  }
  const KernelRegistry& host_kernels = cpu::CpuKernels();
  const KernelRegistry& device_kernels = CudaKernels();
  // Device kernels are bound on a copy whose float32 values carry their device type.
  Graph device_graph = g;
  device_dtype.assign(g.values.size(), DataType::kFloat32);
  for (size_t v = 0; v < g.values.size(); ++v) {
    device_dtype[v] = Lower(g.values[v].dtype, options.precision);
    device_graph.values[v].dtype = device_dtype[v];
  }
  std::vector<bool> is_static(g.values.size(), false);  // known from shapes and constants alone
  for (size_t v = 0; v < g.values.size(); ++v) is_static[v] = g.values[v].constant != nullptr;

  steps.clear();
  placement = {};
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& node = g.nodes[i];
    Step step;
    step.node = i;
    bool all_static = true;
    for (int in : node.inputs) {
      if (in != kNoValue && !is_static[static_cast<size_t>(in)]) all_static = false;
    }
    if (IsShapeOp(node.op_type) || all_static) {
      step.where = Where::kShapeHost;
    } else {
      step.where = Where::kFallback;
      if (const KernelDef* def = device_kernels.Find(node.op_type, g.opset)) {
        auto bound = BindNode(device_graph, node, device_kernels, options.precision);
        if (bound.ok()) {
          step.where = Where::kDevice;
          step.kernel = std::move(bound->kernel);
          step.host_slot.assign(node.inputs.size(), false);
          for (int k : def->host_inputs) {
            if (k >= 0 && static_cast<size_t>(k) < node.inputs.size()) step.host_slot[static_cast<size_t>(k)] = true;
          }
          step.own_copy.assign(node.inputs.size(), false);
          for (size_t k = 0; k < node.inputs.size(); ++k) {
            int in = node.inputs[k];
            step.own_copy[k] =
                in != kNoValue && g.values[static_cast<size_t>(in)].constant && step.kernel->OwnsCopyOfInput(k);
          }
          for (int o : node.outputs) {
            if (o == kNoValue) continue;
            size_t ov = static_cast<size_t>(o);
            if (device_graph.values[ov].dtype != device_dtype[ov]) {
              return Internal(Graph::Describe(node) + ": the CUDA kernel produces " +
                              std::string(DataTypeName(device_graph.values[ov].dtype)) + " where the model has " +
                              std::string(DataTypeName(g.values[ov].dtype)));
            }
          }
        } else if (bound.status().code() != StatusCode::kUnimplemented) {
          return bound.status();
        }
      }
    }
    if (step.where != Where::kDevice) {
      if (step.where == Where::kFallback) {
        // A channels-last value read or written by a CPU kernel would be in the wrong order.
        for (const std::vector<int>* io : {&node.inputs, &node.outputs}) {
          for (int v : *io) {
            if (v != kNoValue && g.values[static_cast<size_t>(v)].nhwc) {
              return FailedPrecondition("channels-last value at a CPU fallback");
            }
          }
        }
      }
      MF_ASSIGN_OR_RETURN(BoundKernel bound, BindNode(g, node, host_kernels));
      step.kernel = std::move(bound.kernel);
    }
    switch (step.where) {
      case Where::kDevice:
        ++placement.device;
        break;
      case Where::kShapeHost:
        ++placement.host;
        break;
      case Where::kFallback:
        ++placement.fallback;
        if (std::find(placement.fallback_ops.begin(), placement.fallback_ops.end(), node.op_type) ==
            placement.fallback_ops.end()) {
          placement.fallback_ops.push_back(node.op_type);
        }
        break;
    }
    for (int o : node.outputs) {
      if (o != kNoValue) is_static[static_cast<size_t>(o)] = step.where == Where::kShapeHost;
    }
    steps.push_back(std::move(step));
  }

  // What is read where; lifetimes; capturability.
  is_graph_input.assign(g.values.size(), false);
  for (int v : g.inputs) is_graph_input[static_cast<size_t>(v)] = true;
  host_read_input.assign(g.inputs.size(), false);
  std::vector<bool> read_on_device(g.values.size(), false);
  std::vector<int> last_use(g.values.size(), -1);
  capturable = placement.fallback == 0;
  for (size_t s = 0; s < steps.size(); ++s) {
    const Step& step = steps[s];
    const Node& node = g.nodes[step.node];
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      int in = node.inputs[k];
      if (in == kNoValue) continue;
      size_t v = static_cast<size_t>(in);
      last_use[v] = static_cast<int>(s);
      if (step.where == Where::kDevice && step.own_copy[k]) continue;  // the kernel's own copy is read
      bool on_host = step.where != Where::kDevice || step.host_slot[k];
      if (!on_host) {
        read_on_device[v] = true;
        continue;
      }
      if (IsShapeOp(node.op_type)) continue;  // reads the shape only
      if (is_graph_input[v]) {
        for (size_t i = 0; i < g.inputs.size(); ++i) {
          if (g.inputs[i] == in) host_read_input[i] = true;
        }
      } else if (!is_static[v]) {
        capturable = false;  // a device result read on the host: the host work depends on data
      }
    }
  }
  std::vector<bool> is_output(g.values.size(), false);
  for (int v : g.outputs) is_output[static_cast<size_t>(v)] = true;
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (last_use[v] >= 0 && !is_output[v] && !g.values[v].constant && !is_graph_input[v]) {
      steps[static_cast<size_t>(last_use[v])].release.push_back(static_cast<int>(v));
    }
  }

  // Constants read on the device are uploaded once.
  device_constants.assign(g.values.size(), nullptr);
  constant_bytes = 0;
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (!g.values[v].constant || !read_on_device[v]) continue;
    MF_ASSIGN_OR_RETURN(Tensor t, UploadConstant(*g.values[v].constant, device_dtype[v]));
    constant_bytes += t.byte_size();
    device_constants[v] = std::make_shared<const Tensor>(std::move(t));
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<Context>> CudaPlan::Impl::Acquire() const {
  {
    std::unique_lock<std::mutex> lock(pool_mu);
    pool_cv.wait(lock, [&] { return !idle.empty() || contexts < kMaxContexts; });
    if (!idle.empty()) {
      auto ctx = std::move(idle.back());
      idle.pop_back();
      return ctx;
    }
    ++contexts;
  }
  auto ctx = std::make_unique<Context>();
  auto made = [&]() -> Status {
    MF_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&ctx->run.stream, cudaStreamNonBlocking));
    MF_CUDNN_RETURN_IF_ERROR(cudnnCreate(&ctx->run.cudnn));
    MF_CUDNN_RETURN_IF_ERROR(cudnnSetStream(ctx->run.cudnn, ctx->run.stream));
    MF_CUBLAS_RETURN_IF_ERROR(cublasLtCreate(&ctx->run.cublaslt));
    ctx->run.workspace_bytes = kWorkspaceBytes;
    MF_CUDA_RETURN_IF_ERROR(
        cudaHostAlloc(reinterpret_cast<void**>(&ctx->fault_host), sizeof(int), cudaHostAllocMapped));
    *ctx->fault_host = 0;
    MF_CUDA_RETURN_IF_ERROR(
        cudaHostGetDevicePointer(reinterpret_cast<void**>(&ctx->run.fault_word), ctx->fault_host, 0));
    return Status::Ok();
  }();
  if (!made.ok()) {
    std::lock_guard<std::mutex> lock(pool_mu);
    --contexts;
    pool_cv.notify_one();
    return made;
  }
  return ctx;
}

void CudaPlan::Impl::Release(std::unique_ptr<Context> ctx) const {
  std::lock_guard<std::mutex> lock(pool_mu);
  idle.push_back(std::move(ctx));
  pool_cv.notify_one();
}

std::string CudaPlan::Impl::Signature(const std::vector<const Tensor*>& inputs) const {
  std::string key;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = *inputs[i];
    key.push_back(static_cast<char>(t.dtype()));
    key.push_back(static_cast<char>(t.rank()));
    key.append(reinterpret_cast<const char*>(t.shape().data()), t.shape().size() * sizeof(int64_t));
    if (host_read_input[i]) key.append(t.bytes());  // e.g. a shape the graph takes as an input
  }
  return key;
}

Status CudaPlan::Impl::Execute(Context& ctx, const std::vector<const Tensor*>& inputs, Mode mode, Captured* captured,
                               std::vector<Tensor>* outputs) const {
  const Graph& g = graph;
  cudaStream_t stream = ctx.run.stream;
  Frame f(g.values.size());
  for (size_t v = 0; v < g.values.size(); ++v) {
    f.host[v] = g.values[v].constant.get();
    f.device[v] = device_constants[v].get();
  }
  for (size_t i = 0; i < g.inputs.size(); ++i) f.host[static_cast<size_t>(g.inputs[i])] = inputs[i];

  // Host -> device, converted to the device type. In a capture the copy must read memory that
  // outlives the run: the signature's input staging, or a pinned copy kept with the graph.
  auto to_device = [&](size_t v) -> StatusOr<const Tensor*> {
    if (f.device[v]) return f.device[v];
    const Tensor* host = f.host[v];
    if (!host) return Internal("value '" + g.values[v].name + "' was not computed");
    Tensor staged;
    int input_index = -1;
    for (size_t i = 0; i < g.inputs.size(); ++i) {
      if (static_cast<size_t>(g.inputs[i]) == v) input_index = static_cast<int>(i);
    }
    if (mode == Mode::kCapture && input_index >= 0) {
      // The graph reads the input where each replay copies it (see Captured::device_inputs).
      staged = Tensor::Adopt(host->dtype(), host->shape(), captured->device_inputs[static_cast<size_t>(input_index)],
                             Location::kCuda, &KeepBuffer);
    } else {
      MF_ASSIGN_OR_RETURN(staged, AllocateDevice(host->dtype(), host->shape()));
      const void* src = host->raw_data();
      if (mode == Mode::kCapture && host->byte_size()) {
        // A host value computed from shapes and constants: the same on every replay of this
        // signature, so the graph copies it from pinned memory kept with the graph.
        MF_ASSIGN_OR_RETURN(auto copy, PinnedBuffer::Create(host->byte_size()));
        std::memcpy(copy->data(), host->raw_data(), host->byte_size());
        src = copy->data();
        captured->uploads.push_back(std::move(copy));
      }
      if (host->byte_size()) {
        MF_CUDA_RETURN_IF_ERROR(
            cudaMemcpyAsync(staged.raw_data(), src, host->byte_size(), cudaMemcpyHostToDevice, stream));
      }
    }
    if (staged.dtype() != device_dtype[v]) {
      MF_ASSIGN_OR_RETURN(Tensor converted, AllocateDevice(device_dtype[v], host->shape()));
      MF_RETURN_IF_ERROR(ConvertOnDevice(staged, &converted));
      staged = std::move(converted);
    }
    f.device_owned[v] = std::move(staged);
    f.device[v] = &f.device_owned[v];
    return f.device[v];
  };
  // Device -> host, in the model's type. Waits for the stream (eager runs only).
  auto to_host = [&](size_t v) -> StatusOr<const Tensor*> {
    if (f.host[v]) return f.host[v];
    const Tensor* dev = f.device[v];
    if (!dev) return Internal("value '" + g.values[v].name + "' was not computed");
    if (mode == Mode::kCapture)
      return Internal("a captured run read device value '" + g.values[v].name + "' on the host");
    Tensor converted;
    if (dev->dtype() != g.values[v].dtype) {
      MF_ASSIGN_OR_RETURN(converted, AllocateDevice(g.values[v].dtype, dev->shape()));
      MF_RETURN_IF_ERROR(ConvertOnDevice(*dev, &converted));
      dev = &converted;
    }
    MF_ASSIGN_OR_RETURN(Tensor host, Tensor::AllocateUninitialized(dev->dtype(), dev->shape()));
    if (host.byte_size()) {
      MF_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(host.raw_data(), dev->raw_data(), host.byte_size(), cudaMemcpyDeviceToHost, stream));
    }
    MF_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    f.host_owned[v] = std::move(host);
    f.host[v] = &f.host_owned[v];
    return f.host[v];
  };

  std::vector<const Tensor*> in;
  std::vector<Tensor> out;
  for (size_t si = 0; si < steps.size(); ++si) {
    const Step& step = steps[si];
    const Node& node = g.nodes[step.node];
    ctx.run.step = static_cast<int>(si);
    in.clear();
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      int iv = node.inputs[k];
      if (iv == kNoValue) {
        in.push_back(nullptr);
        continue;
      }
      size_t v = static_cast<size_t>(iv);
      const Tensor* t = nullptr;
      if (step.where == Where::kDevice && step.own_copy[k]) {
        t = f.host[v];  // the constant, for its shape; the kernel reads its own device copy
      } else if (step.where == Where::kDevice && !step.host_slot[k]) {
        MF_ASSIGN_OR_RETURN(t, to_device(v));
      } else if (IsShapeOp(node.op_type) && !f.host[v] && f.device[v]) {
        t = f.device[v];  // Shape and Size read only the shape
      } else {
        MF_ASSIGN_OR_RETURN(t, to_host(v));
      }
      in.push_back(t);
    }
    out.clear();
    out.resize(node.outputs.size());
    Status s = step.kernel->Run(in, out);
    if (!s.ok()) return s.WithContext(Graph::Describe(node));
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      int o = node.outputs[k];
      if (o == kNoValue) continue;
      size_t v = static_cast<size_t>(o);
      if (out[k].location() == Location::kCuda) {
        f.device_owned[v] = std::move(out[k]);
        f.device[v] = &f.device_owned[v];
      } else {
        f.host_owned[v] = std::move(out[k]);
        f.host[v] = &f.host_owned[v];
      }
    }
    for (int v : step.release) f.Drop(static_cast<size_t>(v));
  }

  // Outputs, in the model's types.
  for (size_t o = 0; o < g.outputs.size(); ++o) {
    size_t v = static_cast<size_t>(g.outputs[o]);
    if (mode == Mode::kEager) {
      MF_ASSIGN_OR_RETURN(const Tensor* host, to_host(v));
      // A downloaded output this run owns is handed over, unless another output names it again.
      const bool owned = host == &f.host_owned[v];
      if (owned &&
          std::count(g.outputs.begin() + static_cast<std::ptrdiff_t>(o) + 1, g.outputs.end(), g.outputs[o]) == 0) {
        outputs->push_back(std::move(f.host_owned[v]));
        f.host[v] = nullptr;
      } else {
        outputs->push_back(host->Clone());
      }
      continue;
    }
    // Capture: host-computed outputs are the same on every replay of this signature; device
    // outputs are copied into pinned staging by the graph.
    if (f.host[v]) {
      captured->host_outputs[o] = is_graph_input[v] ? nullptr : std::make_shared<const Tensor>(f.host[v]->Clone());
      captured->output_meta[o] = {f.host[v]->dtype(), f.host[v]->shape()};
      continue;
    }
    const Tensor* dev = f.device[v];
    if (!dev) return Internal("graph output '" + g.values[v].name + "' was not computed");
    Tensor converted;
    if (dev->dtype() != g.values[v].dtype) {
      MF_ASSIGN_OR_RETURN(converted, AllocateDevice(g.values[v].dtype, dev->shape()));
      MF_RETURN_IF_ERROR(ConvertOnDevice(*dev, &converted));
      dev = &converted;
    }
    MF_ASSIGN_OR_RETURN(captured->output_staging[o], PinnedBuffer::Create(dev->byte_size()));
    captured->output_meta[o] = {dev->dtype(), dev->shape()};
    if (dev->byte_size()) {
      MF_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(captured->output_staging[o]->data(), dev->raw_data(), dev->byte_size(),
                                              cudaMemcpyDeviceToHost, stream));
    }
  }
  return Status::Ok();
}

Status CudaPlan::Impl::Capture(Context& ctx, const std::vector<const Tensor*>& inputs, Captured* captured) const {
  const Graph& g = graph;
  for (void* p : captured->device_inputs) FreeCounted(p);
  captured->device_inputs.clear();
  for (const Tensor* t : inputs) {
    MF_ASSIGN_OR_RETURN(void* p, MallocCounted(std::max<size_t>(t->byte_size(), 1)));
    captured->device_inputs.push_back(p);
  }
  captured->output_staging.clear();
  captured->output_staging.resize(g.outputs.size());
  captured->output_meta.assign(g.outputs.size(), {});
  captured->host_outputs.assign(g.outputs.size(), nullptr);
  captured->uploads.clear();
  // Relaxed: cuDNN and cuBLASLt may query the device while we capture.
  MF_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(ctx.run.stream, cudaStreamCaptureModeRelaxed));
  Status s = Execute(ctx, inputs, Mode::kCapture, captured, nullptr);
  cudaGraph_t graph_handle = nullptr;
  cudaError_t ended = cudaStreamEndCapture(ctx.run.stream, &graph_handle);
  if (s.ok()) s = CudaError(ended, "cudaStreamEndCapture");
  if (s.ok()) s = CudaError(cudaGraphInstantiate(&captured->exec, graph_handle, 0), "cudaGraphInstantiate");
  if (graph_handle) cudaGraphDestroy(graph_handle);
  if (!s.ok()) {
    cudaGetLastError();  // a failed capture leaves no sticky error behind
    return s;
  }
  // The graph owns its activations from now on: give back what the eager runs of this signature
  // left cached in the stream-ordered pool, or the device would hold both.
  cudaMemPool_t pool = nullptr;
  if (cudaDeviceGetDefaultMemPool(&pool, options.device_id) == cudaSuccess) {
    MF_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(ctx.run.stream));
    cudaMemPoolTrimTo(pool, 0);
  }
  return s;
}

Status CudaPlan::Impl::TakeFault(Context& ctx) const {
  volatile int* word = ctx.fault_host;
  const int fault = *word;
  if (fault == 0) return Status::Ok();
  *word = 0;
  const size_t step = static_cast<size_t>(FaultStep(fault));
  std::string where = step < steps.size() ? Graph::Describe(graph.nodes[steps[step].node]) : "a device kernel";
  return InvalidArgument(where + ": " + FaultText(FaultReason(fault)));
}

Status CudaPlan::Impl::Replay(Context& ctx, const std::vector<const Tensor*>& inputs, Captured* captured,
                              std::vector<Tensor>* outputs) const {
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i]->byte_size()) {
      MF_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(captured->device_inputs[i], inputs[i]->raw_data(), inputs[i]->byte_size(),
                                              cudaMemcpyHostToDevice, ctx.run.stream));
    }
  }
  MF_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(captured->exec, ctx.run.stream));
  MF_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(ctx.run.stream));
  for (size_t o = 0; o < graph.outputs.size(); ++o) {
    if (captured->host_outputs[o]) {
      outputs->push_back(captured->host_outputs[o]->Clone());
      continue;
    }
    if (!captured->output_staging[o]) {  // a graph input passed through
      for (size_t i = 0; i < graph.inputs.size(); ++i) {
        if (graph.inputs[i] == graph.outputs[o]) {
          outputs->push_back(inputs[i]->Clone());
          break;
        }
      }
      continue;
    }
    const auto& [dtype, shape] = captured->output_meta[o];
    MF_ASSIGN_OR_RETURN(Tensor t, Tensor::AllocateUninitialized(dtype, shape));
    if (t.byte_size()) std::memcpy(t.raw_data(), captured->output_staging[o]->data(), t.byte_size());
    outputs->push_back(std::move(t));
  }
  return Status::Ok();
}

CudaPlan::CudaPlan(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaPlan::~CudaPlan() = default;

StatusOr<std::unique_ptr<CudaPlan>> CudaPlan::Create(Graph graph, const SessionOptions& options) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    return Unavailable("no CUDA GPU is visible to this process (check CUDA_VISIBLE_DEVICES and the driver)");
  }
  if (options.device_id < 0 || options.device_id >= count) {
    return InvalidArgument("device_id " + std::to_string(options.device_id) + " is not one of the " +
                           std::to_string(count) + " visible GPUs");
  }
  if (options.precision == Precision::kBf16) return Unimplemented("bfloat16 precision on the CUDA backend");
  MF_RETURN_IF_ERROR(LoadCublasLt());
  MF_CUDA_RETURN_IF_ERROR(cudaSetDevice(options.device_id));
  // Stream-ordered allocations come from the device's default pool; keep what it holds between
  // runs so steady-state runs never go back to the driver (up to the memory cap, if there is one).
  cudaMemPool_t pool = nullptr;
  MF_CUDA_RETURN_IF_ERROR(cudaDeviceGetDefaultMemPool(&pool, options.device_id));
  const size_t limit = GpuMemoryLimit(options.device_id);
  uint64_t keep = limit == 0 ? UINT64_MAX : limit;
  MF_CUDA_RETURN_IF_ERROR(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));

  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->graph = std::move(graph);
  Status bound = impl->Bind(/*allow_channels_last=*/true);
  if (bound.code() == StatusCode::kFailedPrecondition) bound = impl->Bind(/*allow_channels_last=*/false);
  MF_RETURN_IF_ERROR(bound);
  const NodePlacement& p = impl->placement;
  if (p.fallback > 0) {
    std::string ops;
    for (const std::string& op : p.fallback_ops) ops += (ops.empty() ? "" : ",") + op;
    log::Warning("runtime: some nodes have no CUDA kernel and run on the CPU",
                 {{"nodes", std::to_string(p.fallback)}, {"ops", ops}});
  }
  return std::unique_ptr<CudaPlan>(new CudaPlan(std::move(impl)));
}

Status CudaPlan::Run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>* outputs) const {
  const Impl& m = *impl_;
  MF_CUDA_RETURN_IF_ERROR(cudaSetDevice(m.options.device_id));
  MF_ASSIGN_OR_RETURN(std::unique_ptr<Context> ctx, m.Acquire());
  ScopedRunContext scope(&ctx->run);

  Captured* captured = nullptr;
  if (m.capturable) {
    std::string key = m.Signature(inputs);
    auto it = ctx->signatures.find(key);
    if (it == ctx->signatures.end()) {
      if (ctx->signatures.size() >= kMaxSignatures) {
        ctx->signatures.erase(ctx->recent.back());
        ctx->recent.pop_back();
      }
      it = ctx->signatures.emplace(key, std::make_unique<Captured>()).first;
    } else {
      ctx->recent.remove(key);
    }
    ctx->recent.push_front(key);
    captured = it->second.get();
  }

  std::vector<Tensor> result;
  Status s;
  if (captured && !captured->failed && captured->runs > 0) {
    if (!captured->exec) {
      s = m.Capture(*ctx, inputs, captured);
      if (!s.ok()) {
        log::Warning("runtime: CUDA graph capture failed; this input signature runs uncaptured",
                     {{"error", s.ToString()}});
        captured->failed = true;
      }
    }
    if (captured->exec) s = m.Replay(*ctx, inputs, captured, &result);
  }
  if (!captured || captured->failed || captured->runs == 0) {
    s = m.Execute(*ctx, inputs, Mode::kEager, nullptr, &result);
  }
  // Also on failure: the stream must be idle before its context serves another run, and before
  // the fault word is read.
  Status synced = CudaError(cudaStreamSynchronize(ctx->run.stream), "cudaStreamSynchronize");
  if (s.ok()) s = synced;
  Status fault = m.TakeFault(*ctx);
  if (s.ok()) s = fault;
  if (captured && s.ok()) ++captured->runs;
  m.Release(std::move(ctx));
  MF_RETURN_IF_ERROR(s);
  *outputs = std::move(result);
  return Status::Ok();
}

size_t CudaPlan::constant_bytes() const { return impl_->constant_bytes; }
const NodePlacement& CudaPlan::placement() const { return impl_->placement; }
bool CudaPlan::capturable() const { return impl_->capturable; }

}  // namespace mf::runtime::cuda
