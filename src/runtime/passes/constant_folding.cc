#include "runtime/graph/bind.h"
#include "runtime/passes/passes.h"

namespace mf::runtime {

Status FoldConstants(Graph* graph, const KernelRegistry& registry, bool fold) {
  std::vector<Node> kept;
  kept.reserve(graph->nodes.size());
  for (Node& node : graph->nodes) {
    MF_ASSIGN_OR_RETURN(BoundKernel bound, BindNode(*graph, node, registry));
    bool all_constant = fold;
    for (int in : node.inputs) {
      if (in != kNoValue && !graph->values[static_cast<size_t>(in)].constant) all_constant = false;
    }
    if (!all_constant) {
      kept.push_back(std::move(node));
      continue;
    }
    std::vector<const Tensor*> inputs;
    for (int in : node.inputs)
      inputs.push_back(in == kNoValue ? nullptr : graph->values[static_cast<size_t>(in)].constant.get());
    std::vector<Tensor> outputs(node.outputs.size());
    Status s = bound.kernel->Run(inputs, outputs);
    if (!s.ok()) return InvalidArgument(Graph::Describe(node) + ": fails on its constant inputs: " + s.message());
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      if (node.outputs[i] == kNoValue) continue;
      Value& v = graph->values[static_cast<size_t>(node.outputs[i])];
      v.shape = outputs[i].shape();
      v.constant = std::make_shared<const Tensor>(std::move(outputs[i]));
    }
  }
  graph->nodes = std::move(kept);
  return Status::Ok();
}

void RemoveDeadNodes(Graph* graph) {
  // Walk backwards so a chain of dead nodes goes in one pass.
  std::vector<int> uses = CountUses(*graph);
  std::vector<bool> dead(graph->nodes.size(), false);
  for (size_t i = graph->nodes.size(); i-- > 0;) {
    const Node& n = graph->nodes[i];
    bool used = false;
    for (int o : n.outputs) {
      if (o != kNoValue && uses[static_cast<size_t>(o)] > 0) used = true;
    }
    if (used) continue;
    dead[i] = true;
    for (int in : n.inputs) {
      if (in != kNoValue) --uses[static_cast<size_t>(in)];
    }
  }
  std::vector<Node> kept;
  for (size_t i = 0; i < graph->nodes.size(); ++i) {
    if (!dead[i]) kept.push_back(std::move(graph->nodes[i]));
  }
  graph->nodes = std::move(kept);
}

}  // namespace mf::runtime
