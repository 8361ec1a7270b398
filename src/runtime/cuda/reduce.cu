// Reductions over a set of axes (ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd,
// ReduceSumSquare, ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp) and ArgMax/ArgMin, on the
// GPU. Attribute handling, opset differences, validation and messages mirror cpu/reduce.cc.
//
// Accumulation: in double for float32, float16 and float64 (the CPU kernel accumulates floats in
// double, and reductions are memory-bound, so this costs nothing measurable and keeps results
// within the FP32 tolerance even for long sums), and in the element type itself for integers
// (as the CPU kernel does, including its wrap-around).
//
// Shape of the work: the input's dims are merged into alternating runs of kept and reduced dims.
// When the innermost run is reduced, one block reduces each output (reads coalesce along the
// row); otherwise one thread reduces each output (neighbouring threads read neighbouring kept
// elements, which coalesces too).
#include <algorithm>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "runtime/cuda/data_common.h"
#include "runtime/cuda/device_util.cuh"
#include "runtime/ops/reduce_axes.h"

namespace mf::runtime::cuda {
namespace {

using ops::ReduceKind;

// Accumulator: double for every float type, the element type for integers.
template <typename T>
using Acc =
    std::conditional_t<std::is_same_v<T, float> || std::is_same_v<T, __half> || std::is_same_v<T, double>, double, T>;

template <typename T>
__device__ __forceinline__ Acc<T> InitialValue(ReduceKind kind) {
  using A = Acc<T>;
  if constexpr (std::is_floating_point_v<A>) {
    if (kind == ReduceKind::kMax) return -std::numeric_limits<A>::infinity();
    if (kind == ReduceKind::kMin) return std::numeric_limits<A>::infinity();
  } else {
    if (kind == ReduceKind::kMax) return std::numeric_limits<A>::lowest();
    if (kind == ReduceKind::kMin) return std::numeric_limits<A>::max();
  }
  return kind == ReduceKind::kProd ? A(1) : A(0);
}

// Folds one element into an accumulator (the CPU kernel's `combine`).
template <typename A>
__device__ __forceinline__ A Combine(ReduceKind kind, A a, A v) {
  switch (kind) {
    case ReduceKind::kMax:
      return v > a ? v : a;
    case ReduceKind::kMin:
      return v < a ? v : a;
    case ReduceKind::kProd:
      return static_cast<A>(a * v);
    case ReduceKind::kSumSquare:
    case ReduceKind::kL2:
      return static_cast<A>(a + v * v);
    case ReduceKind::kL1:
      if constexpr (std::is_signed_v<A>)
        return static_cast<A>(a + (v < 0 ? -v : v));
      else
        return static_cast<A>(a + v);
    case ReduceKind::kLogSumExp:
      return static_cast<A>(a + static_cast<A>(exp(static_cast<double>(v))));
    default:
      return static_cast<A>(a + v);
  }
}

// Merges two partial accumulators.
template <typename A>
__device__ __forceinline__ A Merge(ReduceKind kind, A a, A b) {
  switch (kind) {
    case ReduceKind::kMax:
      return b > a ? b : a;
    case ReduceKind::kMin:
      return b < a ? b : a;
    case ReduceKind::kProd:
      return static_cast<A>(a * b);
    default:
      return static_cast<A>(a + b);
  }
}

template <typename T>
__device__ __forceinline__ void Finish(ReduceKind kind, Acc<T> a, int64_t count, T* out, int64_t o) {
  using A = Acc<T>;
  if (kind == ReduceKind::kMean) {
    // As the CPU kernel: the count converted to the accumulator type (a no-op for floats).
    A c = static_cast<A>(count);
    if (count && c != A(0)) a = static_cast<A>(a / c);
  }
  if (kind == ReduceKind::kL2) a = static_cast<A>(sqrt(static_cast<double>(a)));
  if (kind == ReduceKind::kLogSum || kind == ReduceKind::kLogSumExp) a = static_cast<A>(log(static_cast<double>(a)));
  Store(out, o, a);
}

// The input split into kept dims (indexed by the output position) and reduced dims (indexed by
// the position within one reduction), each with the input's strides.
struct ReducePlan {
  int kept_rank = 0, red_rank = 0;
  int64_t kept_dims[kMaxDims] = {}, kept_strides[kMaxDims] = {};
  int64_t red_dims[kMaxDims] = {}, red_strides[kMaxDims] = {};
};

__device__ __forceinline__ int64_t Offset(int64_t linear, int rank, const int64_t* dims, const int64_t* strides) {
  int64_t off = 0;
  for (int d = rank - 1; d >= 0; --d) {
    int64_t q = linear / dims[d];
    off += (linear - q * dims[d]) * strides[d];
    linear = q;
  }
  return off;
}

// One thread per output.
template <typename T>
__global__ void ReduceThreadKernel(const T* __restrict__ x, T* __restrict__ out, int64_t n_out, int64_t count,
                                   ReducePlan p, ReduceKind kind) {
  MF_GRID_STRIDE_LOOP(o, n_out) {
    int64_t base = Offset(o, p.kept_rank, p.kept_dims, p.kept_strides);
    Acc<T> a = InitialValue<T>(kind);
    for (int64_t j = 0; j < count; ++j) {
      a = Combine(kind, a, static_cast<Acc<T>>(Load(x, base + Offset(j, p.red_rank, p.red_dims, p.red_strides))));
    }
    Finish(kind, a, count, out, o);
  }
}

// One block per output; blockDim.x is a power of two.
template <typename T>
__global__ void ReduceBlockKernel(const T* __restrict__ x, T* __restrict__ out, int64_t n_out, int64_t count,
                                  ReducePlan p, ReduceKind kind) {
  using A = Acc<T>;
  extern __shared__ __align__(8) unsigned char shared_bytes[];
  A* partial = reinterpret_cast<A*>(shared_bytes);
  const bool contiguous = p.red_rank == 1 && p.red_strides[0] == 1;
  for (int64_t o = blockIdx.x; o < n_out; o += gridDim.x) {
    int64_t base = Offset(o, p.kept_rank, p.kept_dims, p.kept_strides);
    A a = InitialValue<T>(kind);
    for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
      int64_t off = contiguous ? j : Offset(j, p.red_rank, p.red_dims, p.red_strides);
      a = Combine(kind, a, static_cast<A>(Load(x, base + off)));
    }
    partial[threadIdx.x] = a;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
      if (threadIdx.x < s) partial[threadIdx.x] = Merge(kind, partial[threadIdx.x], partial[threadIdx.x + s]);
      __syncthreads();
    }
    if (threadIdx.x == 0) Finish(kind, partial[0], count, out, o);
    __syncthreads();  // partial[0] is read before the next output overwrites it
  }
}

bool IsReducibleType(DataType t) { return t != DataType::kString && t != DataType::kBool && t != DataType::kBFloat16; }
bool IsFloatType(DataType t) { return t == DataType::kFloat32 || t == DataType::kFloat64 || t == DataType::kFloat16; }

Status RunReduce(ReduceKind kind, const Tensor& x, const std::vector<bool>& reduced, bool keepdims, Tensor& out) {
  ops::ReduceShape reduced_shape = ops::ReducedShape(x.shape(), reduced, keepdims);
  int64_t count = reduced_shape.count;
  MF_ASSIGN_OR_RETURN(out, AllocateDevice(x.dtype(), std::move(reduced_shape.shape)));
  int64_t n_out = out.num_elements();
  if (n_out == 0) return Status::Ok();
  // Merge neighbouring dims of the same kind (the input is contiguous), dropping extents of 1.
  std::vector<int64_t> strides = RowMajorStrides(x.shape());
  std::vector<int64_t> kd, ks, rd, rs;
  int last = -1;  // 0 kept, 1 reduced: the kind of the previous surviving dim
  for (int i = 0; i < x.rank(); ++i) {
    int64_t d = x.dim(i);
    if (d == 1) continue;
    bool red = reduced[static_cast<size_t>(i)];
    std::vector<int64_t>& dims = red ? rd : kd;
    std::vector<int64_t>& st = red ? rs : ks;
    if (last == static_cast<int>(red)) {
      dims.back() *= d;
      st.back() = strides[static_cast<size_t>(i)];
    } else {
      dims.push_back(d);
      st.push_back(strides[static_cast<size_t>(i)]);
    }
    last = static_cast<int>(red);
  }
  if (kd.size() > static_cast<size_t>(kMaxDims) || rd.size() > static_cast<size_t>(kMaxDims)) {
    return Unimplemented("a reduction over " + std::to_string(rd.size()) + " separate axis runs on the GPU");
  }
  ReducePlan p;
  p.kept_rank = static_cast<int>(kd.size());
  p.red_rank = static_cast<int>(rd.size());
  for (size_t i = 0; i < kd.size(); ++i) {
    p.kept_dims[i] = kd[i];
    p.kept_strides[i] = ks[i];
  }
  for (size_t i = 0; i < rd.size(); ++i) {
    p.red_dims[i] = rd[i];
    p.red_strides[i] = rs[i];
  }
  bool inner_reduced = last == 1;
  cudaStream_t s = Current().stream;
  return ops::DispatchNumeric<__half>(x.dtype(), [&](auto tag) -> Status {
    using T = decltype(tag);
    if (inner_reduced && count >= 32) {
      int threads = 32;
      while (threads < 256 && threads < count) threads *= 2;
      unsigned blocks = static_cast<unsigned>(std::min<int64_t>(n_out, 1 << 20));
      ReduceBlockKernel<T>
          <<<blocks, threads, threads * sizeof(Acc<T>), s>>>(x.data<T>(), out.data<T>(), n_out, count, p, kind);
    } else {
      ReduceThreadKernel<T><<<BlocksFor(n_out), kThreads, 0, s>>>(x.data<T>(), out.data<T>(), n_out, count, p, kind);
    }
    MF_CUDA_RETURN_IF_LAUNCH_FAILED();
    return Status::Ok();
  });
}

KernelFactory ReduceFactory(ReduceKind kind, int64_t axes_input_since) {
  return [kind, axes_input_since](const KernelInit& init) -> StatusOr<BoundKernel> {
    MF_RETURN_IF_ERROR(ops::RequireDataInput(
        init, [kind](DataType t) { return IsReducibleType(t) && (!ops::ReduceNeedsFloat(kind) || IsFloatType(t)); }));
    DataType t = init.dtype(0);
    MF_ASSIGN_OR_RETURN(ops::ReduceAttributes attrs, ops::ReadReduceAttributes(init, axes_input_since));
    return Bind(
        [=](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
          const Tensor& x = *in[0];
          const Tensor* axes = in.size() > 1 ? in[1] : nullptr;
          if (attrs.axes_from_input) MF_RETURN_IF_ERROR(RequireHost(axes, "axes"));
          MF_ASSIGN_OR_RETURN(std::vector<bool> reduced, ops::ReducedAxes(attrs, axes, x.rank()));
          return RunReduce(kind, x, reduced, attrs.keepdims, out[0]);
        },
        {t});
  };
}

// ArgMax / ArgMin: one thread per (outer, inner) position walks the axis in order, so ties and
// NaNs resolve exactly as in the CPU kernel's sequential loop.
template <typename T>
__global__ void ArgKernel(const T* __restrict__ x, int64_t* __restrict__ out, int64_t n_out, int64_t len, int64_t inner,
                          bool is_max, bool last) {
  MF_GRID_STRIDE_LOOP(p, n_out) {
    int64_t o = p / inner, i = p - o * inner;
    int64_t base = o * len * inner + i;
    int64_t best = 0;
    auto b = Load(x, base);
    for (int64_t j = 1; j < len; ++j) {
      auto v = Load(x, base + j * inner);
      bool better = is_max ? (last ? v >= b : v > b) : (last ? v <= b : v < b);
      if (better) {
        best = j;
        b = v;
      }
    }
    out[p] = best;
  }
}

// Long contiguous rows (inner == 1: class scores, vocabularies): one block per row. The result
// must equal the sequential loop's, whose comparisons are false against NaN: a NaN in position 0
// is never replaced (the answer is 0), and any later NaN is never chosen. So position 0 decides
// the NaN case, and the block reduces the non-NaN values, ties going to the lower (or, with
// select_last_index, the higher) position.
template <typename T>
__global__ void ArgRowKernel(const T* __restrict__ x, int64_t* __restrict__ out, int64_t rows, int64_t len, bool is_max,
                             bool last) {
  using V = decltype(Load(x, 0));
  __shared__ V best_value[256];
  __shared__ int64_t best_index[256];
  // Whether (v, i) beats (b, j), j == -1 meaning "no candidate yet".
  auto beats = [&](V v, int64_t i, V b, int64_t j) {
    if (j < 0) return true;
    if (v == b) return last ? i > j : i < j;
    return is_max ? v > b : v < b;
  };
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* row = x + r * len;
    V b{};
    int64_t j = -1;
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
      V v = Load(row, i);
      if (v != v) continue;  // NaN
      if (beats(v, i, b, j)) {
        b = v;
        j = i;
      }
    }
    best_value[threadIdx.x] = b;
    best_index[threadIdx.x] = j;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
      if (threadIdx.x < s) {
        int64_t k = best_index[threadIdx.x + s];
        if (k >= 0 && beats(best_value[threadIdx.x + s], k, best_value[threadIdx.x], best_index[threadIdx.x])) {
          best_value[threadIdx.x] = best_value[threadIdx.x + s];
          best_index[threadIdx.x] = k;
        }
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      V first = Load(row, 0);
      out[r] = first != first || best_index[0] < 0 ? 0 : best_index[0];
    }
    __syncthreads();  // the arrays are reused by the next row
  }
}

KernelFactory ArgFactory(bool is_max) {
  return [is_max](const KernelInit& init) -> StatusOr<BoundKernel> {
    MF_RETURN_IF_ERROR(ops::RequireDataInput(init, IsReducibleType));
    MF_ASSIGN_OR_RETURN(ops::ArgReduceAttributes attrs, ops::ReadArgReduceAttributes(init));
    return Bind(
        [=](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
          const Tensor& x = *in[0];
          MF_ASSIGN_OR_RETURN(ops::ArgReducePlan plan, ops::PlanArgReduce(x.shape(), attrs.axis, attrs.keepdims));
          int64_t len = plan.len, inner = plan.inner;
          MF_ASSIGN_OR_RETURN(out[0], AllocateDevice(DataType::kInt64, plan.shape));
          int64_t n_out = plan.outer * inner;
          if (n_out == 0) return Status::Ok();
          cudaStream_t s = Current().stream;
          return ops::DispatchNumeric<__half>(x.dtype(), [&](auto tag) -> Status {
            using T = decltype(tag);
            if (inner == 1 && len >= 1024) {
              unsigned blocks = static_cast<unsigned>(std::min<int64_t>(n_out, 1 << 20));
              ArgRowKernel<T><<<blocks, 256, 0, s>>>(x.data<T>(), out[0].data<int64_t>(), n_out, len, is_max,
                                                     attrs.select_last_index);
            } else {
              ArgKernel<T><<<BlocksFor(n_out), kThreads, 0, s>>>(x.data<T>(), out[0].data<int64_t>(), n_out, len, inner,
                                                                 is_max, attrs.select_last_index);
            }
            MF_CUDA_RETURN_IF_LAUNCH_FAILED();
            return Status::Ok();
          });
        },
        {DataType::kInt64});
  };
}

}  // namespace

void RegisterReduceKernels(KernelRegistry* r) {
  r->Register({"ArgMax", 1, ArgFactory(true), "numeric"});
  r->Register({"ArgMin", 1, ArgFactory(false), "numeric"});
  for (const ops::ReduceOp& op : ops::kReduceOps) {
    r->Register({op.name,
                 1,
                 ReduceFactory(op.kind, op.axes_input_since),
                 ops::ReduceNeedsFloat(op.kind) ? "float" : "numeric",
                 {1}});
  }
  RegisterNormKernels(r);
}

}  // namespace mf::runtime::cuda
