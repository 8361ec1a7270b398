// Session: one loaded ONNX model, ready to run. The model server's only view of the runtime.
//
// Load() parses and validates the model file (refusing hostile or unsupported graphs with an
// error that names the node and the reason), rewrites the graph (constant folding, fusions),
// plans memory and binds every node to a kernel of the chosen backend. After Load() returns the
// Session is immutable: Run() is thread-safe, and several threads may run batches on one Session
// at the same time (each Run() uses its own scratch buffers).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "runtime/tensor.h"

namespace mf::runtime {

struct Graph;

enum class Backend : uint8_t { kCpu, kCuda };
// "cpu" | "cuda"; false when unknown.
bool BackendFromName(std::string_view name, Backend* backend);
std::string_view BackendName(Backend backend);

enum class Precision : uint8_t {
  kFp32,  // exact: every kernel computes in float32
  kTf32,  // float32 tensors, but CUDA matrix units may round multiply inputs to TF32 (CPU: kFp32)
  kFp16,  // allows float16 compute where the backend has it (CUDA); CPU treats it as kFp32
  kBf16,  // allows bfloat16 compute where the backend has it; CPU treats it as kFp32 for now
};
// "fp32" | "tf32" | "fp16" | "bf16"; false when unknown.
bool PrecisionFromName(std::string_view name, Precision* precision);

struct SessionOptions {
  Backend backend = Backend::kCpu;
  // Intra-op threads for the CPU backend; 0 means one per available core.
  int threads = 0;
  Precision precision = Precision::kFp32;
  // Graph rewrites (constant folding, Conv+BatchNorm+ReLU and Gemm+activation fusion). Turning
  // them off is for debugging and for tests that compare both ways.
  bool optimize = true;
  // GPU ordinal for Backend::kCuda.
  int device_id = 0;
};

// One graph input or output. Symbolic or unknown dims are -1 (dim 0 is the batch dim when the
// model declares it symbolic).
struct TensorInfo {
  std::string name;
  DataType dtype = DataType::kFloat32;
  Shape shape;
};

struct Signature {
  std::vector<TensorInfo> inputs;   // in the model's declared order
  std::vector<TensorInfo> outputs;  // in the model's declared order
  // Index into inputs/outputs by name, or -1.
  int InputIndex(std::string_view name) const;
  int OutputIndex(std::string_view name) const;
};

// Where a session's nodes run, after graph rewrites.
struct NodePlacement {
  int device = 0;    // on the GPU (0 on the CPU backend)
  int host = 0;      // on the CPU: every node of the CPU backend; shape arithmetic on CUDA
  int fallback = 0;  // CUDA backend: nodes without a CUDA kernel, run by the CPU kernels
  std::vector<std::string> fallback_ops;
};

// Caps the GPU memory this process's CUDA sessions use on GPU `device_id` (weights, activations,
// scratch, CUDA graphs) at `fraction` (0, 1] of its total memory, as TF Serving's
// per_process_gpu_memory_fraction; 0 lifts the cap. A load or a run that would exceed it fails
// with RESOURCE_EXHAUSTED and changes nothing else. UNAVAILABLE without a CUDA build or that GPU.
Status SetGpuMemoryFraction(int device_id, double fraction);
// GPU memory this process's sessions use on `device_id` now (0 without CUDA).
size_t GpuMemoryInUse(int device_id);

class Session {
 public:
  // Loads `model_path` (a model.onnx file). External initializer data files are resolved
  // relative to the model's directory and may not escape it.
  // Errors: NOT_FOUND (no file), INVALID_ARGUMENT (malformed or hostile model, with the node
  // and reason), UNIMPLEMENTED (an op or type this backend does not support, naming it),
  // UNAVAILABLE (backend not present, e.g. no GPU), RESOURCE_EXHAUSTED (too large).
  static StatusOr<std::unique_ptr<Session>> Load(const std::string& model_path,
                                                 const SessionOptions& options);
  // Same, from serialized ModelProto bytes; external data is resolved under `model_dir`
  // (empty: external data is refused).
  static StatusOr<std::unique_ptr<Session>> LoadFromBytes(std::string_view model_bytes,
                                                          const std::string& model_dir,
                                                          const SessionOptions& options);

  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const Signature& signature() const;
  const SessionOptions& options() const;
  const NodePlacement& placement() const;

  // Runs the model. `inputs` are in signature().inputs order, one per input; each must match
  // the declared dtype and rank, and every declared fixed dim (symbolic dims, the batch dim in
  // particular, accept any size). `outputs` is replaced by one tensor per signature output, in
  // order. Thread-safe. Bad inputs give INVALID_ARGUMENT and leave the Session unchanged.
  Status Run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>* outputs) const;
  // An uninitialized host tensor to fill with an input of this session, in the memory the
  // backend reads fastest: page-locked (and reused across calls) on CUDA, so the copy to the
  // device is one DMA; plain memory on the CPU. For callers that assemble inputs anyway (a
  // batching server concatenating requests). Thread-safe.
  StatusOr<Tensor> AllocateInput(DataType dtype, Shape shape) const;

  // Bytes this Session holds: weights after graph rewrites plus the planned activation arena
  // for a batch of one (the server's memory accounting; a Run with batch N uses ~N times the
  // arena part on top).
  size_t memory_bytes() const;
  // True when loading ran the model once on zero inputs (every dynamic dim 1) and it succeeded:
  // the warm-up a server must do before a version takes requests has happened.
  bool warmed_up() const;

  class Impl;

 private:
  explicit Session(std::unique_ptr<Impl> impl);
  static StatusOr<std::unique_ptr<Impl>> Build(Graph graph, const SessionOptions& options);
  std::unique_ptr<Impl> impl_;
};

}  // namespace mf::runtime
