// The small rules every operator family uses: axis normalisation, reading shape/axes inputs and
// numpy broadcasting. Shared by the CPU and CUDA kernels (plain C++: .cu files include it), so
// both backends accept and refuse exactly the same inputs with the same messages.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "runtime/tensor.h"

namespace mf::runtime::ops {

// Maps a possibly negative axis into [0, rank); INVALID_ARGUMENT when out of range.
StatusOr<int> NormalizeAxis(int64_t axis, int rank);

// Reads a 0-D or 1-D int32/int64 host tensor (shape, axes, pads inputs) into int64s.
StatusOr<std::vector<int64_t>> ReadInts(const Tensor& t, const char* what);

// Numpy-style broadcast of two shapes; INVALID_ARGUMENT when incompatible.
StatusOr<Shape> BroadcastShapes(const Shape& a, const Shape& b);

// Row-major strides (in elements) of a contiguous tensor of `shape`.
std::vector<int64_t> RowMajorStrides(const Shape& shape);

// Row-major strides of `shape` as seen from an output of `out_shape` when `shape` is aligned to
// its trailing dims: 0 for missing leading dims and dims of extent 1, so indexing an output
// position with them broadcasts the input.
std::vector<int64_t> BroadcastStrides(const Shape& shape, const Shape& out_shape);

}  // namespace mf::runtime::ops
