// Graph: the runtime's own in-memory form of an ONNX graph, independent of protobuf.
//
// Invariants after LoadModel() (and after every pass): values are in SSA form (each value has at
// most one producer), `nodes` is in topological order, every node input is a graph input, an
// initializer or an earlier node's output, and every graph output is produced or is an
// initializer/input. Values are indices into `values`; kNoValue marks an omitted optional input.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "runtime/tensor.h"

namespace mf::runtime {

inline constexpr int kNoValue = -1;

// One node attribute. Graph-valued attributes (If/Loop bodies) are not supported and never
// reach the IR: the loader refuses them.
struct Attribute {
  std::variant<int64_t, float, std::string, std::vector<int64_t>, std::vector<float>, std::vector<std::string>,
               std::shared_ptr<const Tensor>>
      value;
};

class Attributes {
 public:
  void Set(std::string name, Attribute a) { map_[std::move(name)] = std::move(a); }
  bool Has(const std::string& name) const { return map_.count(name) != 0; }
  // Typed getters: the default when absent, INVALID_ARGUMENT when present with another type.
  StatusOr<int64_t> GetInt(const std::string& name, int64_t dflt) const;
  StatusOr<float> GetFloat(const std::string& name, float dflt) const;
  StatusOr<std::string> GetString(const std::string& name, std::string dflt) const;
  StatusOr<std::vector<int64_t>> GetInts(const std::string& name, std::vector<int64_t> dflt) const;
  StatusOr<std::vector<float>> GetFloats(const std::string& name, std::vector<float> dflt) const;
  StatusOr<std::vector<std::string>> GetStrings(const std::string& name, std::vector<std::string> dflt) const;
  // nullptr when absent.
  StatusOr<std::shared_ptr<const Tensor>> GetTensor(const std::string& name) const;
  const std::map<std::string, Attribute>& map() const { return map_; }

 private:
  std::map<std::string, Attribute> map_;
};

struct Value {
  std::string name;
  // Element type, known for every value once types are inferred at load time.
  DataType dtype = DataType::kFloat32;
  bool dtype_known = false;
  // Static shape when known (-1 for unknown dims); empty optional when even the rank is unknown.
  std::optional<Shape> shape;
  // Set for initializers and folded constants.
  std::shared_ptr<const Tensor> constant;
  // A 4-D activation passed between channels-last-capable kernels only: its tensor keeps the
  // logical NCHW shape but stores the elements in NHWC order (set by AssignChannelsLast; never
  // set on graph inputs, outputs or constants).
  bool nhwc = false;
};

struct Node {
  std::string name;  // ONNX node name, or "<op_type>#<index>" when the file has none
  std::string op_type;
  std::vector<int> inputs;   // kNoValue for omitted optional inputs
  std::vector<int> outputs;  // kNoValue for omitted optional outputs
  Attributes attributes;
  // Fused activation appended by the fusion pass (empty: none). Kernels that accept it apply it
  // to their output in the same pass over memory.
  std::string fused_activation;
  float fused_alpha = 0.f;  // LeakyRelu slope / Clip min
  float fused_beta = 0.f;   // Clip max
  // Set by the fusion pass on a Conv whose output fed an Add: the other Add operand is appended
  // as the last input and added before the activation (a residual connection).
  bool fused_sum = false;
  // Set by FuseMatMulTransposes on a MatMul whose right operand is computed (attention's
  // products): the permutations of the Transposes it reads its inputs through and writes its
  // output through (empty: none), and a constant factor the product is scaled by.
  struct MatMulLayout {
    std::vector<int64_t> perm_a, perm_b, perm_y;
    float scale = 1.f;
    bool plain() const { return perm_a.empty() && perm_b.empty() && perm_y.empty() && scale == 1.f; }
  };
  MatMulLayout matmul_layout;
};

struct Graph {
  std::vector<Value> values;
  std::vector<Node> nodes;
  std::vector<int> inputs;   // graph inputs that are not initializers, in declared order
  std::vector<int> outputs;  // in declared order
  int64_t opset = 0;         // default-domain opset the model imports

  int AddValue(Value v) {
    values.push_back(std::move(v));
    return static_cast<int>(values.size()) - 1;
  }
  // "node 'conv1' (Conv)" for error messages.
  static std::string Describe(const Node& node) { return "node '" + node.name + "' (" + node.op_type + ")"; }
};

}  // namespace mf::runtime
