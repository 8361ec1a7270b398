// Binding a node to a kernel of a registry: the one place that turns "this op is not in the
// registry" into an UNIMPLEMENTED error naming the node, and that records output element types.
#pragma once

#include "runtime/graph/graph.h"
#include "runtime/kernel.h"

namespace mf::runtime {

// Binds `node` of `graph` and sets the element type of its output values. With `uses`
// (CountUses of the graph), constants this node alone reads are offered to the kernel as
// consumable (KernelInit::constant_consumable); only for a plan that drops what its kernels own.
StatusOr<BoundKernel> BindNode(Graph& graph, const Node& node, const KernelRegistry& registry,
                               Precision precision = Precision::kFp32, const std::vector<int>* uses = nullptr);

// For each value, how many node inputs read it (graph outputs count once more).
std::vector<int> CountUses(const Graph& graph);

}  // namespace mf::runtime
