// BatchNormalization (inference) and LayerNormalization: attributes, shape checks and the row
// geometry, shared by the CPU and CUDA kernels.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "runtime/kernel.h"
#include "runtime/tensor.h"

namespace mf::runtime::ops {

// BatchNormalization's epsilon; UNIMPLEMENTED for training mode, spatial = 0 and the training
// outputs (errors carry the node prefix).
StatusOr<float> ReadBatchNormEpsilon(const KernelInit& init);

// BatchNormalization of `x` [N, C, ...] with `params` (scale, B, mean, var): each of C elements.
struct BatchNormShape {
  int64_t n = 0, c = 0;
  int64_t inner = 0;  // elements per (n, c) plane
};
StatusOr<BatchNormShape> CheckBatchNorm(const Tensor& x, const Tensor* const params[4]);

// LayerNormalization's attributes.
struct LayerNormAttributes {
  int64_t axis = -1;
  float epsilon = 1e-5f;
};
StatusOr<LayerNormAttributes> ReadLayerNormAttributes(const KernelInit& init);

// LayerNormalization of `x` from `axis` on: [rows, cols], the normalised dims and the shape of
// the Mean/InvStdDev outputs.
struct LayerNormPlan {
  int axis = 0;
  int64_t rows = 1, cols = 1;
  Shape norm_shape;  // x's dims from the axis on
  Shape stat_shape;  // x's shape with those dims 1
};
StatusOr<LayerNormPlan> PlanLayerNorm(const Shape& x, int64_t axis);

// A scale or bias must broadcast to the normalised dims, the result being those dims.
Status CheckLayerNormParameter(const Shape& parameter, const Shape& norm_shape);

}  // namespace mf::runtime::ops
