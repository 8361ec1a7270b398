// What the elementwise .cu files share: the binary operator set, bind-time checks, and the
// factories each file contributes to RegisterElementwiseKernels (elementwise.cu).
#pragma once

#include <string>

#include "runtime/cuda/cuda_common.h"

namespace mf::runtime::cuda::elementwise {

// Every two-operand pointwise operator. Arithmetic ones produce the input type; comparisons and
// logic produce bool.
enum class BinaryOp : uint8_t {
  kAdd,
  kSub,
  kMul,
  kDiv,
  kPow,
  kMax,
  kMin,
  kPRelu,
  kEqual,
  kLess,
  kGreater,
  kLessOrEqual,
  kGreaterOrEqual,
  kAnd,
  kOr,
  kXor,
};
inline bool ProducesBool(BinaryOp op) { return op >= BinaryOp::kEqual; }

// The element types the arithmetic kernels are compiled for (others fall back to the CPU).
inline bool IsDeviceNumeric(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kFloat64 || t == DataType::kInt32 ||
         t == DataType::kInt64;
}
inline bool IsDeviceFloatKind(DataType t) { return IsDeviceFloat(t) || t == DataType::kFloat64; }

inline std::string TypeName(DataType t) { return std::string(DataTypeName(t)); }

// Input `i` is present and float32/float16 (the device float types); UNIMPLEMENTED otherwise so
// the node runs on the CPU.
inline Status RequireDeviceFloat(const KernelInit& init, size_t i) {
  if (!init.has_input(i)) return init.Error(StatusCode::kInvalidArgument, "missing input " + std::to_string(i));
  if (!IsDeviceFloat(init.dtype(i))) {
    return init.Error(StatusCode::kUnimplemented, "input " + std::to_string(i) + " of type " + TypeName(init.dtype(i)) +
                                                      " is not supported on the GPU (float32/float16 only)");
  }
  return Status::Ok();
}

// Maps a possibly negative axis into [0, rank) (the CPU kernels' wording).
inline StatusOr<int> NormalizeAxis(int64_t axis, int rank) {
  if (axis < -rank || axis >= rank) {
    return InvalidArgument("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  }
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

// Launches `op` over a and b broadcast to `out` (already allocated with the broadcast shape and
// the result type) on Current().stream. The element types must be ones PickBinary accepted.
Status LaunchBinary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out);
// INVALID_ARGUMENT/UNIMPLEMENTED when the kernels are not compiled for (ta, tb) under `op`.
Status CheckBinaryTypes(BinaryOp op, DataType ta, DataType tb);
// out[i] = out[i] / divisor, in place (Mean's final step); float types.
Status LaunchDivideInPlace(Tensor& t, double divisor);

KernelFactory BinaryFactory(BinaryOp op);
KernelFactory VariadicFactory(BinaryOp op, bool mean);
KernelFactory LogicalFactory(BinaryOp op);
StatusOr<BoundKernel> PReluFactory(const KernelInit& init);
StatusOr<BoundKernel> WhereFactory(const KernelInit& init);
StatusOr<BoundKernel> SoftmaxFactory(const KernelInit& init, bool log);

}  // namespace mf::runtime::cuda::elementwise
