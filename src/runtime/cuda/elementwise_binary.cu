// Two-operand pointwise operators with numpy broadcasting (arithmetic, Pow, Max/Min, PRelu,
// comparisons, logic), the variadic folds (Sum, Mean, Max, Min) and Where.
//
// The operator is a kernel argument rather than a template parameter: the branch is uniform
// across the grid, costs nothing next to the memory traffic, and keeps the number of kernel
// instantiations (and nvcc time) proportional to the type combinations only.
#include <cmath>
#include <limits>
#include <type_traits>

#include "runtime/cuda/device_util.cuh"
#include "runtime/cuda/elementwise_internal.cuh"
#include "runtime/ops/indexing.h"
#include "runtime/ops/input_checks.h"

namespace mf::runtime::cuda::elementwise {
namespace {

// Signed integers: wrap-around arithmetic in unsigned (no signed-overflow undefined behaviour).
// The CPU refuses x / 0 and MIN / -1: here the kernel writes defined values (x / 0 = 0, MIN / -1
// = MIN) and raises the same errors as faults (ApplyChecked), which fail the run once its
// stream synchronizes. Constant divisors are also checked at bind time.
template <typename T>
__device__ __forceinline__ T ApplySignedInt(BinaryOp op, T x, T y) {
  using U = std::make_unsigned_t<T>;
  switch (op) {
    case BinaryOp::kAdd:
      return static_cast<T>(static_cast<U>(x) + static_cast<U>(y));
    case BinaryOp::kSub:
      return static_cast<T>(static_cast<U>(x) - static_cast<U>(y));
    case BinaryOp::kMul:
      return static_cast<T>(static_cast<U>(x) * static_cast<U>(y));
    case BinaryOp::kDiv:
      if (y == 0) return T{0};
      if (y == T(-1)) return static_cast<T>(U{0} - static_cast<U>(x));
      return static_cast<T>(x / y);
    case BinaryOp::kMax:
      return x < y ? y : x;
    case BinaryOp::kMin:
      return y < x ? y : x;
    default:
      return T{0};  // Pow and PRelu are refused for integers at bind time
  }
}

// One element of `op`; A and B are the compute types of the inputs, R the result's.
template <typename R, typename A, typename B>
__device__ __forceinline__ R Apply(BinaryOp op, A x, B y) {
  if constexpr (std::is_same_v<R, bool>) {
    switch (op) {
      case BinaryOp::kEqual:
        return x == y;
      case BinaryOp::kLess:
        return x < y;
      case BinaryOp::kGreater:
        return x > y;
      case BinaryOp::kLessOrEqual:
        return x <= y;
      case BinaryOp::kGreaterOrEqual:
        return x >= y;
      case BinaryOp::kAnd:
        return static_cast<bool>(x) && static_cast<bool>(y);
      case BinaryOp::kOr:
        return static_cast<bool>(x) || static_cast<bool>(y);
      case BinaryOp::kXor:
        return static_cast<bool>(x) != static_cast<bool>(y);
      default:
        return false;
    }
  } else if constexpr (std::is_integral_v<R>) {
    static_assert(std::is_signed_v<R> && std::is_same_v<A, R> && std::is_same_v<B, R>);
    return ApplySignedInt<R>(op, x, y);
  } else {
    switch (op) {
      case BinaryOp::kAdd:
        return static_cast<R>(x + y);
      case BinaryOp::kSub:
        return static_cast<R>(x - y);
      case BinaryOp::kMul:
        return static_cast<R>(x * y);
      case BinaryOp::kDiv:
        return static_cast<R>(x / y);
      case BinaryOp::kPow:
        if constexpr (std::is_same_v<R, double>) {
          return pow(x, static_cast<double>(y));
        } else {
          // The CPU kernel's fast paths (x^2 and x^0.5 dominate LayerNorm-style graphs).
          float e = static_cast<float>(y);
          return e == 2.f ? x * x : (e == 0.5f ? sqrtf(x) : powf(x, e));
        }
      // The CPU kernel's expressions, so NaN propagates the same way.
      case BinaryOp::kMax:
        return x < y ? static_cast<R>(y) : static_cast<R>(x);
      case BinaryOp::kMin:
        return y < x ? static_cast<R>(y) : static_cast<R>(x);
      case BinaryOp::kPRelu:
        return x < A(0) ? static_cast<R>(y * x) : static_cast<R>(x);
      default:
        return R{0};
    }
  }
}

template <typename T>
using C = typename Compute<T>::type;

// Apply, raising the CPU kernel's errors for integer division (see FaultSink).
template <typename R, typename A, typename B>
__device__ __forceinline__ R ApplyChecked(BinaryOp op, A x, B y, FaultSink fault) {
  if constexpr (std::is_integral_v<R> && !std::is_same_v<R, bool>) {
    if (op == BinaryOp::kDiv) {
      if (y == 0) {
        fault.Raise(Fault::kDivisionByZero);
      } else if (y == R(-1) && x == std::numeric_limits<R>::min()) {
        fault.Raise(Fault::kDivisionOverflow);
      }
    }
  }
  return Apply<R>(op, x, y);
}

template <typename TA, typename TB, typename TR>
__global__ void BinarySameShape(const TA* a, const TB* b, TR* out, int64_t n, BinaryOp op, FaultSink fault) {
  MF_GRID_STRIDE_LOOP(i, n) Store(out, i, ApplyChecked<C<TR>>(op, Load(a, i), Load(b, i), fault));
}

template <typename TA, typename TB, typename TR>
__global__ void BinaryScalarB(const TA* a, const TB* b, TR* out, int64_t n, BinaryOp op, FaultSink fault) {
  const C<TB> y = Load(b, 0);
  MF_GRID_STRIDE_LOOP(i, n) Store(out, i, ApplyChecked<C<TR>>(op, Load(a, i), y, fault));
}

template <typename TA, typename TB, typename TR>
__global__ void BinaryScalarA(const TA* a, const TB* b, TR* out, int64_t n, BinaryOp op, FaultSink fault) {
  const C<TA> x = Load(a, 0);
  MF_GRID_STRIDE_LOOP(i, n) Store(out, i, ApplyChecked<C<TR>>(op, x, Load(b, i), fault));
}

// b repeats along the leading dims of a (a bias [H] added to [N, S, H]): a modulo instead of the
// per-dim index arithmetic of the general path.
template <typename TA, typename TB, typename TR>
__global__ void BinaryRepeatB(const TA* a, const TB* b, TR* out, int64_t n, int64_t nb, BinaryOp op, FaultSink fault) {
  MF_GRID_STRIDE_LOOP(i, n) Store(out, i, ApplyChecked<C<TR>>(op, Load(a, i), Load(b, i % nb), fault));
}

template <typename TA, typename TB, typename TR>
__global__ void BinaryRepeatA(const TA* a, const TB* b, TR* out, int64_t n, int64_t na, BinaryOp op, FaultSink fault) {
  MF_GRID_STRIDE_LOOP(i, n) Store(out, i, ApplyChecked<C<TR>>(op, Load(a, i % na), Load(b, i), fault));
}

template <typename TA, typename TB, typename TR>
__global__ void BinaryBroadcast(const TA* a, const TB* b, TR* out, int64_t n, BinaryOp op, Broadcast ba, Broadcast bb,
                                FaultSink fault) {
  MF_GRID_STRIDE_LOOP(i, n) Store(out, i, ApplyChecked<C<TR>>(op, Load(a, ba.Offset(i)), Load(b, bb.Offset(i)), fault));
}

// Whether `in`, without its leading 1s, is the trailing part of `out` (so element i of `out`
// reads element i % size(in)).
bool RepeatsAlongLeadingDims(const Shape& in, const Shape& out) {
  size_t first = 0;
  while (first < in.size() && in[first] == 1) ++first;
  const size_t k = in.size() - first;
  if (k > out.size()) return false;
  for (size_t j = 0; j < k; ++j) {
    if (in[first + j] != out[out.size() - k + j]) return false;
  }
  return true;
}

template <typename TA, typename TB, typename TR>
Status Launch(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  const int64_t n = out.num_elements();
  if (n == 0) return Status::Ok();
  cudaStream_t s = Current().stream;
  const TA* pa = a.data<TA>();
  const TB* pb = b.data<TB>();
  TR* po = out.data<TR>();
  const FaultSink fault = CurrentFaultSink();
  if (a.shape() == out.shape() && b.shape() == out.shape()) {
    BinarySameShape<<<BlocksFor(n), kThreads, 0, s>>>(pa, pb, po, n, op, fault);
  } else if (a.shape() == out.shape() && b.num_elements() == 1) {
    BinaryScalarB<<<BlocksFor(n), kThreads, 0, s>>>(pa, pb, po, n, op, fault);
  } else if (b.shape() == out.shape() && a.num_elements() == 1) {
    BinaryScalarA<<<BlocksFor(n), kThreads, 0, s>>>(pa, pb, po, n, op, fault);
  } else if (a.shape() == out.shape() && RepeatsAlongLeadingDims(b.shape(), out.shape())) {
    BinaryRepeatB<<<BlocksFor(n), kThreads, 0, s>>>(pa, pb, po, n, b.num_elements(), op, fault);
  } else if (b.shape() == out.shape() && RepeatsAlongLeadingDims(a.shape(), out.shape())) {
    BinaryRepeatA<<<BlocksFor(n), kThreads, 0, s>>>(pa, pb, po, n, a.num_elements(), op, fault);
  } else {
    MF_ASSIGN_OR_RETURN(Broadcast ba, MakeBroadcast(a.shape(), out.shape()));
    MF_ASSIGN_OR_RETURN(Broadcast bb, MakeBroadcast(b.shape(), out.shape()));
    BinaryBroadcast<<<BlocksFor(n), kThreads, 0, s>>>(pa, pb, po, n, op, ba, bb, fault);
  }
  MF_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

// Calls fn(T{}) for the C++ type of a device-numeric dtype (and bool when allowed).
template <typename Fn>
Status DispatchNumeric(DataType t, bool allow_bool, Fn&& fn) {
  switch (t) {
    case DataType::kFloat32:
      return fn(float{});
    case DataType::kFloat16:
      return fn(__half{});
    case DataType::kFloat64:
      return fn(double{});
    case DataType::kInt32:
      return fn(int32_t{});
    case DataType::kInt64:
      return fn(int64_t{});
    case DataType::kBool:
      if (allow_bool) return fn(bool{});
      break;
    default:
      break;
  }
  return Unimplemented("element type " + TypeName(t) + " is not supported on the GPU");
}

template <typename Fn>
Status DispatchFloatKind(DataType t, Fn&& fn) {
  switch (t) {
    case DataType::kFloat32:
      return fn(float{});
    case DataType::kFloat16:
      return fn(__half{});
    case DataType::kFloat64:
      return fn(double{});
    default:
      return Unimplemented("element type " + TypeName(t) + " is not supported on the GPU");
  }
}

bool IsLogic(BinaryOp op) { return op == BinaryOp::kAnd || op == BinaryOp::kOr || op == BinaryOp::kXor; }

template <typename T>
__global__ void DivideInPlace(T* data, int64_t n, C<T> divisor) {
  MF_GRID_STRIDE_LOOP(i, n) Store(data, i, Load(data, i) / divisor);
}

// Integer Div by a constant divisor: the CPU kernel's errors, found at bind time.
template <typename T>
Status CheckConstantDivisor(const Tensor& divisor, const Tensor* dividend) {
  const T* pb = divisor.data<T>();
  for (int64_t i = 0; i < divisor.num_elements(); ++i) {
    if (pb[i] == 0) return InvalidArgument("integer division by zero");
    if (pb[i] == T(-1) && dividend) {
      const T* pa = dividend->data<T>();
      for (int64_t j = 0; j < dividend->num_elements(); ++j) {
        if (pa[j] == std::numeric_limits<T>::min()) return InvalidArgument("integer division overflows");
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Status CheckBinaryTypes(BinaryOp op, DataType ta, DataType tb) {
  if (IsLogic(op)) {
    if (ta != DataType::kBool || tb != DataType::kBool) return InvalidArgument("inputs must be bool");
    return Status::Ok();
  }
  bool pow_mixed = op == BinaryOp::kPow && ta != tb;
  if (ta != tb && !pow_mixed) {
    return InvalidArgument("input types differ: " + TypeName(ta) + " and " + TypeName(tb));
  }
  if (op == BinaryOp::kEqual && ta == DataType::kBool) return Status::Ok();
  if (!IsDeviceNumeric(ta) || !IsDeviceNumeric(tb)) {
    return Unimplemented("element type " + TypeName(ta == tb || !IsDeviceNumeric(ta) ? ta : tb) +
                         " is not supported on the GPU");
  }
  if ((op == BinaryOp::kPow || op == BinaryOp::kPRelu) && !IsDeviceFloatKind(ta)) {
    return Unimplemented("integer " + std::string(op == BinaryOp::kPow ? "Pow" : "PRelu") + " runs on the CPU");
  }
  return Status::Ok();
}

Status LaunchBinary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  const DataType ta = a.dtype(), tb = b.dtype();
  if (ta == tb) {
    return DispatchNumeric(ta, ProducesBool(op), [&](auto tag) -> Status {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, bool>) {
        return Launch<bool, bool, bool>(op, a, b, out);
      } else {
        if (ProducesBool(op)) return Launch<T, T, bool>(op, a, b, out);
        return Launch<T, T, T>(op, a, b, out);
      }
    });
  }
  // Pow with an exponent of another type: float base, any numeric exponent.
  if (op != BinaryOp::kPow) return Internal("mixed input types reached a binary kernel");
  return DispatchFloatKind(ta, [&](auto base) -> Status {
    using TA = decltype(base);
    return DispatchNumeric(tb, false, [&](auto exponent) -> Status {
      using TB = decltype(exponent);
      return Launch<TA, TB, TA>(op, a, b, out);
    });
  });
}

Status LaunchDivideInPlace(Tensor& t, double divisor) {
  const int64_t n = t.num_elements();
  if (n == 0) return Status::Ok();
  cudaStream_t s = Current().stream;
  return DispatchFloatKind(t.dtype(), [&](auto tag) -> Status {
    using T = decltype(tag);
    DivideInPlace<<<BlocksFor(n), kThreads, 0, s>>>(t.data<T>(), n, static_cast<C<T>>(divisor));
    MF_CUDA_RETURN_IF_LAUNCH_FAILED();
    return Status::Ok();
  });
}

KernelFactory BinaryFactory(BinaryOp op) {
  return [op](const KernelInit& init) -> StatusOr<BoundKernel> {
    if (init.num_inputs() != 2 || !init.has_input(0) || !init.has_input(1)) {
      return init.Error(StatusCode::kInvalidArgument, "needs exactly two inputs");
    }
    const DataType ta = init.dtype(0), tb = init.dtype(1);
    Status types = CheckBinaryTypes(op, ta, tb);
    if (!types.ok()) return init.Error(types.code(), types.message());
    if (op == BinaryOp::kDiv && (ta == DataType::kInt32 || ta == DataType::kInt64) && init.constant_inputs[1]) {
      const Tensor* dividend = init.constant_inputs[0];
      Status s = ta == DataType::kInt32 ? CheckConstantDivisor<int32_t>(*init.constant_inputs[1], dividend)
                                        : CheckConstantDivisor<int64_t>(*init.constant_inputs[1], dividend);
      if (!s.ok()) return init.Error(s.code(), s.message());
    }
    const DataType out_type = ProducesBool(op) ? DataType::kBool : ta;
    return Bind(
        [op, out_type](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
          MF_ASSIGN_OR_RETURN(Shape shape, ops::BroadcastShapes(in[0]->shape(), in[1]->shape()));
          MF_ASSIGN_OR_RETURN(out[0], AllocateDevice(out_type, std::move(shape)));
          return LaunchBinary(op, *in[0], *in[1], out[0]);
        },
        {out_type});
  };
}

KernelFactory LogicalFactory(BinaryOp op) { return BinaryFactory(op); }

StatusOr<BoundKernel> PReluFactory(const KernelInit& init) {
  MF_RETURN_IF_ERROR(RequireDeviceFloat(init, 0));
  MF_RETURN_IF_ERROR(RequireDeviceFloat(init, 1));
  if (init.dtype(0) != init.dtype(1)) return init.Error(StatusCode::kInvalidArgument, "input types differ");
  const DataType t = init.dtype(0);
  return Bind(
      [t](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        MF_ASSIGN_OR_RETURN(Shape shape, ops::BroadcastShapes(in[0]->shape(), in[1]->shape()));
        if (shape != in[0]->shape()) return InvalidArgument("PRelu slope must broadcast to the input's shape");
        MF_ASSIGN_OR_RETURN(out[0], AllocateDevice(t, std::move(shape)));
        return LaunchBinary(BinaryOp::kPRelu, *in[0], *in[1], out[0]);
      },
      {t});
}

// Max, Min, Sum, Mean over any number of inputs: a left fold of the binary kernels with
// multidirectional broadcasting; Mean divides the sum at the end.
KernelFactory VariadicFactory(BinaryOp op, bool mean) {
  return [op, mean](const KernelInit& init) -> StatusOr<BoundKernel> {
    MF_RETURN_IF_ERROR(ops::RequireInputsOfOneType(init));
    MF_RETURN_IF_ERROR(ops::RequireDataInput(
        init, [mean](DataType t) { return IsDeviceNumeric(t) && (!mean || IsDeviceFloatKind(t)); }));
    const DataType t = init.dtype(0);
    return Bind(
        [op, mean, t](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
          Tensor acc;
          if (in.size() == 1) {
            MF_ASSIGN_OR_RETURN(acc, CopyOnDevice(*in[0], in[0]->shape()));
          }
          for (size_t i = 1; i < in.size(); ++i) {
            const Tensor& left = i == 1 ? *in[0] : acc;
            MF_ASSIGN_OR_RETURN(Shape shape, ops::BroadcastShapes(left.shape(), in[i]->shape()));
            MF_ASSIGN_OR_RETURN(Tensor next, AllocateDevice(t, std::move(shape)));
            MF_RETURN_IF_ERROR(LaunchBinary(op, left, *in[i], next));
            acc = std::move(next);
          }
          if (mean) MF_RETURN_IF_ERROR(LaunchDivideInPlace(acc, static_cast<double>(in.size())));
          out[0] = std::move(acc);
          return Status::Ok();
        },
        {t});
  };
}

// ---- Where(cond, x, y): three-way broadcasting, elements moved by width only ----

namespace {

template <typename T>
__global__ void WhereSameShape(const bool* c, const T* x, const T* y, T* out, int64_t n) {
  MF_GRID_STRIDE_LOOP(i, n) out[i] = c[i] ? x[i] : y[i];
}

template <typename T>
__global__ void WhereBroadcast(const bool* c, const T* x, const T* y, T* out, int64_t n, Broadcast bc, Broadcast bx,
                               Broadcast by) {
  MF_GRID_STRIDE_LOOP(i, n) out[i] = c[bc.Offset(i)] ? x[bx.Offset(i)] : y[by.Offset(i)];
}

template <typename T>
Status LaunchWhere(const Tensor& c, const Tensor& x, const Tensor& y, Tensor& out) {
  const int64_t n = out.num_elements();
  if (n == 0) return Status::Ok();
  cudaStream_t s = Current().stream;
  const T* px = static_cast<const T*>(x.raw_data());
  const T* py = static_cast<const T*>(y.raw_data());
  T* po = static_cast<T*>(out.raw_data());
  if (c.shape() == out.shape() && x.shape() == out.shape() && y.shape() == out.shape()) {
    WhereSameShape<<<BlocksFor(n), kThreads, 0, s>>>(c.data<bool>(), px, py, po, n);
  } else {
    MF_ASSIGN_OR_RETURN(Broadcast bc, MakeBroadcast(c.shape(), out.shape()));
    MF_ASSIGN_OR_RETURN(Broadcast bx, MakeBroadcast(x.shape(), out.shape()));
    MF_ASSIGN_OR_RETURN(Broadcast by, MakeBroadcast(y.shape(), out.shape()));
    WhereBroadcast<<<BlocksFor(n), kThreads, 0, s>>>(c.data<bool>(), px, py, po, n, bc, bx, by);
  }
  MF_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

}  // namespace

StatusOr<BoundKernel> WhereFactory(const KernelInit& init) {
  if (init.num_inputs() != 3 || !init.has_input(0) || !init.has_input(1) || !init.has_input(2)) {
    return init.Error(StatusCode::kInvalidArgument, "needs three inputs");
  }
  if (init.dtype(0) != DataType::kBool) return init.Error(StatusCode::kInvalidArgument, "condition must be bool");
  const DataType t = init.dtype(1);
  if (t != init.dtype(2)) return init.Error(StatusCode::kInvalidArgument, "X and Y types differ");
  if (t == DataType::kString) return init.Error(StatusCode::kUnimplemented, "string Where is not supported");
  const size_t width = ElementSize(t);
  if (width != 1 && width != 2 && width != 4 && width != 8) {
    return init.Error(StatusCode::kUnimplemented, "element type " + TypeName(t) + " is not supported on the GPU");
  }
  return Bind(
      [t, width](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        MF_ASSIGN_OR_RETURN(Shape s01, ops::BroadcastShapes(in[0]->shape(), in[1]->shape()));
        MF_ASSIGN_OR_RETURN(Shape shape, ops::BroadcastShapes(s01, in[2]->shape()));
        MF_ASSIGN_OR_RETURN(out[0], AllocateDevice(t, std::move(shape)));
        switch (width) {
          case 1:
            return LaunchWhere<uint8_t>(*in[0], *in[1], *in[2], out[0]);
          case 2:
            return LaunchWhere<uint16_t>(*in[0], *in[1], *in[2], out[0]);
          case 4:
            return LaunchWhere<uint32_t>(*in[0], *in[1], *in[2], out[0]);
          default:
            return LaunchWhere<uint64_t>(*in[0], *in[1], *in[2], out[0]);
        }
      },
      {t});
}

}  // namespace mf::runtime::cuda::elementwise
