#include "runtime/graph/shape_values.h"

#include <map>
#include <set>
#include <string>

namespace mf::runtime {
namespace {

// Ops whose output shapes follow from their inputs' shapes, their attributes and the values of
// the inputs listed (by index): those must be fixed too. All are deterministic.
const std::map<std::string, std::set<size_t>>& ShapeFromShapesOps() {
  static const auto* ops = new std::map<std::string, std::set<size_t>>{
      // Elementwise and other shape-preserving ops.
      {"Abs", {}},
      {"Add", {}},
      {"And", {}},
      {"BatchNormalization", {}},
      {"Cast", {}},
      {"Ceil", {}},
      {"Clip", {}},
      {"Div", {}},
      {"Dropout", {}},
      {"Equal", {}},
      {"Erf", {}},
      {"Exp", {}},
      {"Floor", {}},
      {"Gelu", {}},
      {"Greater", {}},
      {"GreaterOrEqual", {}},
      {"HardSigmoid", {}},
      {"HardSwish", {}},
      {"Identity", {}},
      {"InstanceNormalization", {}},
      {"LayerNormalization", {}},
      {"LeakyRelu", {}},
      {"Less", {}},
      {"LessOrEqual", {}},
      {"Log", {}},
      {"LogSoftmax", {}},
      {"Max", {}},
      {"Min", {}},
      {"Mod", {}},
      {"Mul", {}},
      {"Neg", {}},
      {"Not", {}},
      {"Or", {}},
      {"Pow", {}},
      {"Reciprocal", {}},
      {"Relu", {}},
      {"Sigmoid", {}},
      {"Sign", {}},
      {"Softmax", {}},
      {"Softplus", {}},
      {"Sqrt", {}},
      {"Sub", {}},
      {"Tanh", {}},
      {"Where", {}},
      // Shapes from the inputs' shapes and attributes.
      {"ArgMax", {}},
      {"ArgMin", {}},
      {"AveragePool", {}},
      {"Concat", {}},
      {"Conv", {}},
      {"ConvTranspose", {}},
      {"DepthToSpace", {}},
      {"Flatten", {}},
      {"Gather", {}},
      {"GatherElements", {}},
      {"Gemm", {}},
      {"GlobalAveragePool", {}},
      {"GlobalMaxPool", {}},
      {"MatMul", {}},
      {"MaxPool", {}},
      {"SpaceToDepth", {}},
      {"Transpose", {}},
      // Shapes from the values of shape-like inputs as well.
      {"ConstantOfShape", {0}},
      {"Expand", {1}},
      {"Pad", {1, 3}},
      {"Range", {0, 1, 2}},
      {"ReduceMax", {1}},
      {"ReduceMean", {1}},
      {"ReduceMin", {1}},
      {"ReduceSum", {1}},
      {"Reshape", {1}},
      {"Slice", {1, 2, 3, 4}},
      {"Split", {1}},
      {"Squeeze", {1}},
      {"Tile", {1}},
      {"Unsqueeze", {1}},
  };
  return *ops;
}

}  // namespace

std::vector<bool> ValuesFixedByInputShapes(const Graph& graph) {
  const size_t n = graph.values.size();
  std::vector<bool> fixed(n, false), shape_fixed(n, false);
  for (size_t v = 0; v < n; ++v) {
    if (graph.values[v].constant) fixed[v] = shape_fixed[v] = true;
  }
  for (int v : graph.inputs) shape_fixed[static_cast<size_t>(v)] = true;
  const auto& ops = ShapeFromShapesOps();
  for (const Node& node : graph.nodes) {
    const auto input = [&](size_t k) { return node.inputs[k]; };
    bool outputs_shape_fixed = false, outputs_fixed = false;
    if (node.op_type == "Shape" || node.op_type == "Size") {
      outputs_shape_fixed = true;  // a 1-D tensor of the input's rank, a scalar
      outputs_fixed = !node.inputs.empty() && input(0) != kNoValue && shape_fixed[static_cast<size_t>(input(0))];
    } else if (auto op = ops.find(node.op_type); op != ops.end()) {
      outputs_shape_fixed = outputs_fixed = true;
      for (size_t k = 0; k < node.inputs.size(); ++k) {
        if (input(k) == kNoValue) continue;
        const size_t v = static_cast<size_t>(input(k));
        outputs_shape_fixed = outputs_shape_fixed && (op->second.count(k) ? fixed[v] : shape_fixed[v]);
        outputs_fixed = outputs_fixed && fixed[v];
      }
      outputs_fixed = outputs_fixed && outputs_shape_fixed;
    }
    for (int out : node.outputs) {
      if (out == kNoValue) continue;
      shape_fixed[static_cast<size_t>(out)] = outputs_shape_fixed;
      fixed[static_cast<size_t>(out)] = outputs_fixed;
    }
  }
  return fixed;
}

}  // namespace mf::runtime
