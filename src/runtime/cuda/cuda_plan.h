// CudaPlan: the executor of the CUDA backend.
//
// Placement. Each node runs on the GPU when the CUDA registry binds it, except the shape
// arithmetic that export tools emit around Reshape/Expand (Shape, Size, and nodes whose inputs
// are all known from shapes and constants alone): those run on the host with the CPU kernels,
// where their small results are needed anyway. A node the CUDA registry cannot bind (an op or
// type it lacks) falls back to its CPU kernel, with copies in and out; Load logs which.
//
// Values live where their consumers want them: device kernels read device memory except their
// host_inputs slots; constants read on the device are uploaded once at load time (converted to
// float16 under Precision::kFp16, where every float32 value of the graph is kept in float16 on
// the device and converted back at the outputs).
//
// Running. A run borrows an execution context (a stream with its cuDNN and cuBLASLt handles and a
// workspace) from a small pool, so several runs proceed at once. Device memory is stream-ordered
// (cudaMallocAsync from a pool that keeps what it got, so steady-state runs allocate nothing from
// the driver). The first run of an input signature (shapes, plus the values of inputs read on the
// host) executes eagerly; the second is captured into a CUDA graph, and later runs of that
// signature on that context replay it (one launch instead of one per node). Graphs whose host
// work depends on device results (data-dependent shapes, CPU fallbacks) are never captured.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "runtime/graph/graph.h"
#include "runtime/session_options.h"

namespace mf::runtime::cuda {

class CudaPlan {
 public:
  // UNAVAILABLE when no GPU is visible (or options.device_id is not one).
  static StatusOr<std::unique_ptr<CudaPlan>> Create(Graph graph, const SessionOptions& options);
  ~CudaPlan();

  // Same contract as ExecutionPlan::Run: host tensors in, host tensors out.
  Status Run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>* outputs) const;

  // Device bytes of the uploaded constants (weights).
  size_t constant_bytes() const;
  const NodePlacement& placement() const;
  // Whether runs of a repeated input signature are replayed from a CUDA graph.
  bool capturable() const;

  class Impl;

 private:
  explicit CudaPlan(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace mf::runtime::cuda
