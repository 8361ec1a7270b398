#include "runtime/graph/bind.h"

namespace mf::runtime {

StatusOr<BoundKernel> BindNode(Graph& graph, const Node& node, const KernelRegistry& registry, Precision precision,
                               const std::vector<int>* uses) {
  const KernelDef* def = registry.Find(node.op_type, graph.opset);
  if (!def) {
    return Unimplemented(Graph::Describe(node) + ": operator " + node.op_type + " (opset " +
                         std::to_string(graph.opset) + ") is not supported by this backend");
  }
  KernelInit init{.node = node, .opset = graph.opset, .precision = precision};
  if (!node.outputs.empty() && node.outputs[0] != kNoValue) {
    init.output_nhwc = graph.values[static_cast<size_t>(node.outputs[0])].nhwc;
  }
  for (int in : node.inputs) {
    if (in == kNoValue) {
      init.input_dtypes.push_back(std::nullopt);
      init.constant_inputs.push_back(nullptr);
      init.constant_consumable.push_back(false);
      init.input_nhwc.push_back(false);
      continue;
    }
    const Value& v = graph.values[static_cast<size_t>(in)];
    init.input_nhwc.push_back(v.nhwc);
    if (!v.dtype_known) return Internal(Graph::Describe(node) + ": type of input '" + v.name + "' is unknown");
    init.input_dtypes.push_back(v.dtype);
    init.constant_inputs.push_back(v.constant.get());
    // One reading input of one node, and no other holder of the tensor (values may share one).
    init.constant_consumable.push_back(uses && v.constant && (*uses)[static_cast<size_t>(in)] == 1 &&
                                       v.constant.use_count() == 1);
  }
  auto bound = def->factory(init);
  if (!bound.ok()) {
    const std::string prefix = Graph::Describe(node);
    const std::string& m = bound.status().message();
    if (m.compare(0, prefix.size(), prefix) == 0) return bound.status();
    return bound.status().WithContext(prefix);
  }
  if (bound->output_dtypes.size() != node.outputs.size()) {
    return Internal(Graph::Describe(node) + ": kernel declared " + std::to_string(bound->output_dtypes.size()) +
                    " outputs, the node has " + std::to_string(node.outputs.size()));
  }
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    int o = node.outputs[i];
    if (o == kNoValue) continue;
    Value& v = graph.values[static_cast<size_t>(o)];
    v.dtype = bound->output_dtypes[i];
    v.dtype_known = true;
  }
  return bound;
}

std::vector<int> CountUses(const Graph& graph) {
  std::vector<int> uses(graph.values.size(), 0);
  for (const Node& n : graph.nodes) {
    for (int in : n.inputs) {
      if (in != kNoValue) ++uses[static_cast<size_t>(in)];
    }
  }
  for (int o : graph.outputs) ++uses[static_cast<size_t>(o)];
  return uses;
}

}  // namespace mf::runtime
