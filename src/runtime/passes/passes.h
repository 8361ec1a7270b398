// Graph rewrites run at load time. Each keeps the Graph invariants (SSA, topological order)
// and leaves the model's results unchanged up to float rounding.
#pragma once

#include "common/status.h"
#include "runtime/graph/graph.h"
#include "runtime/kernel.h"

namespace mf::runtime {

// Binds every node once (which also infers element types) and evaluates nodes whose inputs are
// all constant, replacing them by their values. With `fold` false only the types are inferred.
// A node that fails on its constant inputs is a broken model: INVALID_ARGUMENT naming the node.
Status FoldConstants(Graph* graph, const KernelRegistry& registry, bool fold);

// Folds BatchNormalization into the preceding Conv's weights and bias (constant weights, a
// single consumer), then Conv/Gemm/MatMul + Relu/LeakyRelu/Sigmoid/Tanh/Clip into one node.
void FuseConvBatchNorm(Graph* graph);
// `gelu`: Gelu nodes fuse too (into Gemm/MatMul; the CPU backend runs them, the CUDA one not yet).
void FuseActivations(Graph* graph, bool gelu = false);
// MatMul by a constant [K, N] weight followed by Add of a constant [N] bias: the MatMul
// takes the bias as a third input and adds it itself (the CPU backend's MatMul reads it).
void FuseMatMulBias(Graph* graph);
// PyTorch's export of exact GELU, Mul(Mul(x, Add(Erf(Div(x, sqrt 2)), 1)), 0.5) (or x * 1/sqrt 2
// instead of the Div, operands in either order), becomes one Gelu node (ONNX opset 20's, which
// the CPU backend runs).
void FuseGelu(Graph* graph);
// A MatMul of two computed operands (attention's scores and context) reads its inputs through
// the Transposes before it and writes through a Transpose after it (Node::matmul_layout), and
// absorbs a division or multiplication of an input by a constant scalar: PyTorch's attention
// exports six Transposes and a Div per layer around these two products. Only permutations that
// leave each matrix with a unit stride on one side qualify (the CPU backend's strided sgemm).
void FuseMatMulTransposes(Graph* graph);
// Conv followed by Add of a computed (non-constant) residual: the Conv adds it in place.
void FuseConvAdd(Graph* graph);

// Marks 2-D Conv outputs read only by 2-D Convs (as data or fused residual) and 2-D pools as
// channels-last (Value::nhwc), so chains of convolutions run in the backend's preferred layout
// without converting to NCHW and back between every pair. MaxPool/AveragePool/GlobalMaxPool/
// GlobalAveragePool join the chain as readers and, except the global ones, as producers (both
// backends' pooling kernels read and write NHWC).
void AssignChannelsLast(Graph* graph);

// Drops nodes none of whose outputs is used.
void RemoveDeadNodes(Graph* graph);

}  // namespace mf::runtime
