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
#include "runtime/gpu_memory.h"
#include "runtime/session_options.h"
#include "runtime/tensor.h"

namespace mf::runtime {

struct Graph;

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

class Session {
 public:
  // Loads `model_path` (a model.onnx file). External initializer data files are resolved
  // relative to the model's directory and may not escape it.
  // Errors: NOT_FOUND (no file), INVALID_ARGUMENT (malformed or hostile model, with the node
  // and reason), UNIMPLEMENTED (an op or type this backend does not support, naming it),
  // UNAVAILABLE (backend not present, e.g. no GPU), RESOURCE_EXHAUSTED (too large).
  static StatusOr<std::unique_ptr<Session>> Load(const std::string& model_path, const SessionOptions& options);
  // Same, from serialized ModelProto bytes; external data is resolved under `model_dir`
  // (empty: external data is refused).
  static StatusOr<std::unique_ptr<Session>> LoadFromBytes(std::string_view model_bytes, const std::string& model_dir,
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
  // Run() that also times every node (CPU backend; UNIMPLEMENTED on CUDA, whose kernels are
  // asynchronous): one entry per node run, in execution order. For profiling (modelfleet-run
  // --profile), not for serving.
  struct NodeTime {
    std::string op_type;
    std::string name;
    double seconds = 0;
  };
  Status RunTimed(const std::vector<const Tensor*>& inputs, std::vector<Tensor>* outputs,
                  std::vector<NodeTime>* times) const;
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
