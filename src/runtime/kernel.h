// Kernel: the one interface every backend implements per operator. A KernelFactory binds a
// graph node to a kernel at load time (reading attributes, checking input element types, and
// pre-packing constant inputs such as weights); Kernel::Run then computes the node on tensors
// whose shapes are only known per request. Kernels are immutable after creation, so one kernel
// serves concurrent Run() calls; any per-shape cache inside must be internally synchronized.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "runtime/graph/graph.h"
#include "runtime/session_options.h"
#include "runtime/tensor.h"

namespace mf::runtime {

class Kernel {
 public:
  virtual ~Kernel() = default;
  // `inputs` has one entry per node input (nullptr for an omitted optional input); `outputs`
  // is sized to the node's outputs and the kernel assigns each present one.
  virtual Status Run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs) const = 0;
  // True when the kernel keeps its own (repacked) copy of constant input `index` and reads only
  // its shape at run time: the executor then need not keep the value's data (in device memory,
  // or at all). May turn true once the kernel has run (a CPU conv packs for the first input
  // shape it sees); never turns false again.
  virtual bool OwnsCopyOfInput(size_t /*index*/) const { return false; }
  // Bytes of the kernel's own copies of constant inputs (packed weights).
  virtual size_t owned_bytes() const { return 0; }
  // An input whose buffer the kernel can make output 0's (a convolution adding a residual
  // accumulates into it), or -1. When the run frame owns that input and this node is its last
  // reader, the executor moves the tensor into `outputs[0]` before Run and points the input at
  // it: the kernel then either writes its result there, or moves it aside before replacing
  // outputs[0] (it must still read the input through the pointer it was given).
  virtual int in_place_input() const { return -1; }
};

// What a factory may look at when binding a node.
struct KernelInit {
  const Node& node;
  int64_t opset = 0;
  // One per node input: nullopt for omitted optional inputs.
  std::vector<std::optional<DataType>> input_dtypes;
  // One per node input: the value when the input is a constant (initializer or folded).
  std::vector<const Tensor*> constant_inputs;
  // Physical layouts (see Value::nhwc): one per input, and for output 0. Only kernels that
  // support channels-last are ever given true.
  std::vector<bool> input_nhwc;
  bool output_nhwc = false;
  // The session's precision: device kernels may compute in TF32 or FP16 when it allows.
  Precision precision = Precision::kFp32;
  // One per node input (or empty): true when the input is a constant that this node alone reads
  // and that is no graph output. A kernel that makes its own copy of such a constant may hand
  // the constant's pages back as it copies (ReleaseResidentPages): the plan then drops the
  // constant once OwnsCopyOfInput says so, and nothing else ever reads it. Set by the CPU plan.
  std::vector<bool> constant_consumable;

  size_t num_inputs() const { return input_dtypes.size(); }
  bool has_input(size_t i) const { return i < input_dtypes.size() && input_dtypes[i].has_value(); }
  DataType dtype(size_t i) const { return *input_dtypes[i]; }
  bool input_is_nhwc(size_t i) const { return i < input_nhwc.size() && input_nhwc[i]; }
  bool consumable(size_t i) const { return i < constant_consumable.size() && constant_consumable[i]; }
  const Attributes& attrs() const { return node.attributes; }
  // "node 'x' (Op): <message>" with the given code.
  Status Error(StatusCode code, const std::string& message) const {
    return Status(code, Graph::Describe(node) + ": " + message);
  }
};

struct BoundKernel {
  std::unique_ptr<Kernel> kernel;
  std::vector<DataType> output_dtypes;  // one per node output
};

using KernelFactory = std::function<StatusOr<BoundKernel>(const KernelInit&)>;

struct KernelDef {
  std::string op_type;
  // The oldest default-domain opset whose semantics this kernel implements (it handles every
  // later version up to kMaxOpset).
  int64_t since_opset = 1;
  KernelFactory factory;
  std::string types;  // element types it accepts, for docs/ops.md ("float", "numeric", ...)
  // Device backends: inputs the kernel reads on the host (shapes, axes, pads, scales). The
  // executor hands those as host tensors and every other input in device memory.
  std::vector<int> host_inputs;
};

class KernelRegistry {
 public:
  void Register(KernelDef def);
  // The kernel for `op_type` at `opset`, or nullptr.
  const KernelDef* Find(const std::string& op_type, int64_t opset) const;
  // Every registered op, sorted by name.
  std::vector<const KernelDef*> List() const;

 private:
  std::map<std::string, KernelDef> defs_;
};

// A kernel from a function: most CPU kernels are a function of their inputs and a few attributes
// captured at bind time.
class FunctionKernel final : public Kernel {
 public:
  using Fn = std::function<Status(const std::vector<const Tensor*>&, std::vector<Tensor>&)>;
  // `in_place_input`: see Kernel::in_place_input (`fn` must then handle a donated outputs[0]).
  explicit FunctionKernel(Fn fn, int in_place_input = -1) : fn_(std::move(fn)), in_place_input_(in_place_input) {}
  Status Run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs) const override {
    return fn_(inputs, outputs);
  }
  int in_place_input() const override { return in_place_input_; }

 private:
  Fn fn_;
  int in_place_input_;
};

inline BoundKernel Bind(FunctionKernel::Fn fn, std::vector<DataType> output_dtypes, int in_place_input = -1) {
  return BoundKernel{std::make_unique<FunctionKernel>(std::move(fn), in_place_input), std::move(output_dtypes)};
}

}  // namespace mf::runtime
