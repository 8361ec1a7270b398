// ExecutionPlan: a rewritten graph bound to kernels, with each intermediate value's lifetime
// precomputed so a run frees every buffer right after its last reader (peak memory is the
// widest "cut" of the graph, not the sum of all activations). Immutable and thread-safe: each
// Run() keeps its values in its own frame.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "runtime/graph/graph.h"
#include "runtime/kernel.h"
#include "runtime/memory_pattern.h"

namespace mf::runtime {

class ExecutionPlan {
 public:
  // Binds every node of `graph` (after the passes) to a kernel of `registry`.
  static StatusOr<std::unique_ptr<ExecutionPlan>> Create(Graph graph, const KernelRegistry& registry);

  const Graph& graph() const { return graph_; }

  // `inputs` are the graph inputs in order (already validated by the caller). When
  // `peak_bytes` is set it receives the largest number of intermediate bytes alive at once.
  Status Run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>* outputs, size_t* peak_bytes) const;

  // Run() that also measures each step: `seconds[i]` gets the wall time of the plan's i-th step
  // (its kernel plus the frame bookkeeping before it), and `nodes[i]` the graph node it ran.
  Status RunTimed(const std::vector<const Tensor*>& inputs, std::vector<Tensor>* outputs, std::vector<size_t>* nodes,
                  std::vector<double>* seconds) const;

  // Bytes of all constant values the plan reads (weights after folding and fusion), as the
  // graph holds them.
  size_t constant_bytes() const { return constant_bytes_; }
  // Bytes of the kernels' own copies of constants (packed conv weights).
  size_t kernel_owned_bytes() const;

  // Frees the data of every constant all of whose readers now keep their own copy of it
  // (Kernel::OwnsCopyOfInput), keeping its shape: a CPU conv's weights would otherwise be held
  // twice, plain and packed. Graph outputs keep their data. Returns the bytes freed. Not
  // thread-safe with Run: for a plan that does not serve yet.
  size_t DropConstantsKernelsOwn();

  // Run() once before the plan serves, dropping each constant as soon as all its readers have
  // their own copy (so the plain and packed copies of all the weights never coexist).
  Status WarmUp(const std::vector<const Tensor*>& inputs, std::vector<Tensor>* outputs, size_t* peak_bytes);

 private:
  struct Step {
    size_t node;  // index into graph_.nodes
    std::unique_ptr<Kernel> kernel;
    std::vector<int> release;  // values whose last reader is this step
  };
  ExecutionPlan() = default;
  using AfterStep = std::function<void(const Step&, std::vector<const Tensor*>& frame)>;
  Status RunSteps(const std::vector<const Tensor*>& inputs, std::vector<Tensor>* outputs, size_t* peak_bytes,
                  const AfterStep& after_step) const;
  // True when `value`'s tensor can become this step's output 0 (Kernel::in_place_input): the
  // frame owns it (no graph input or constant), this step is its last reader, and reads it once.
  bool Donatable(const Step& step, int value, const std::vector<const Tensor*>& ptr,
                 const std::vector<Tensor>& owned) const;
  size_t CountConstantBytes() const;
  bool ReadersOwnCopies(int value) const;
  bool DropIfOwned(int value);  // true when the value's data was dropped now

  // Who reads a constant: step index and input slot.
  struct Reader {
    size_t step;
    size_t input;
  };

  Graph graph_;
  std::vector<Step> steps_;
  std::vector<std::vector<Reader>> readers_;  // per value; filled for constants only
  size_t constant_bytes_ = 0;
  mutable MemoryPatterns memory_patterns_;  // the activations' layout per input shapes

  // Outputs of the steps whose values the input shapes fix (shape_values.h: the shape
  // computations exporters emit), per input signature: the first run at those shapes keeps them,
  // the next ones skip those steps. An empty entry: that step's outputs were too large to keep.
  struct FixedOutputs {
    std::vector<std::vector<Tensor>> by_step;
  };
  std::shared_ptr<const FixedOutputs> FindFixedOutputs(const std::string& signature) const;
  void KeepFixedOutputs(const std::string& signature, std::shared_ptr<const FixedOutputs> outputs) const;
  std::vector<bool> fixed_step_;  // per step: all its outputs are fixed by the input shapes
  bool any_fixed_step_ = false;
  mutable std::mutex fixed_mu_;
  mutable std::map<std::string, std::shared_ptr<const FixedOutputs>> fixed_outputs_;
};

}  // namespace mf::runtime
