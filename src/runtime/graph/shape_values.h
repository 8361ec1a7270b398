// Which values of a graph are fixed by the shapes of its inputs: the Shape -> Gather ->
// Unsqueeze -> Concat -> Reshape chains that exporters (torch.onnx with dynamic axes) emit to
// compute shapes at run time. Their results are the same for every run at the same input shapes,
// so a plan computes them once per shapes (runtime/execution_plan.h) instead of running ~150 tiny nodes per
// run of a small Transformer encoder.
//
// A value is fixed by the input shapes when it is a constant, the output of Shape or Size of a
// value whose *shape* is fixed by them, or the output of a deterministic op all of whose inputs
// are fixed. A value's shape is fixed when it is a graph input, a constant, or the output of an
// op whose output shapes follow from its inputs' shapes and from the values of its shape-like
// inputs (Reshape's shape, Slice's starts...), those inputs being fixed themselves. Ops not in
// that list (NonZero, Unique, Loop, If, unknown or fused ops...) end both properties: the
// analysis errs toward computing a value on every run.
#pragma once

#include <vector>

#include "runtime/graph/graph.h"

namespace mf::runtime {

// Per value of `graph` (indexed like graph.values): true when its contents are fixed by the
// shapes (and types) of the graph's inputs.
std::vector<bool> ValuesFixedByInputShapes(const Graph& graph);

}  // namespace mf::runtime
