// Device kernels that select elements by index or position: Gather, GatherElements, Pad and
// Trilu. Validation and messages are the shared rules of ops/gather_rules.h and ops/slice_rules.h.
//
// Out-of-range indices: the CPU kernels refuse them with INVALID_ARGUMENT. Constant indices
// (initializers, folded values) are checked on the host exactly like the CPU kernel does; indices
// computed on the device are checked by the kernel, which reads a clamped element instead (never
// out of bounds) and raises a fault that fails the run once its stream synchronizes (FaultSink).
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "runtime/cuda/data_common.h"
#include "runtime/cuda/device_util.cuh"
#include "runtime/ops/gather_rules.h"
#include "runtime/ops/slice_rules.h"

namespace mf::runtime::cuda {
namespace {

Status RequireIndices(const KernelInit& init, size_t i) {
  MF_RETURN_IF_ERROR(RequireFixedWidth(init, i));
  if (!ops::IsIndexType(init.dtype(i))) {
    return init.Error(StatusCode::kInvalidArgument, "indices must be int32 or int64");
  }
  return Status::Ok();
}

// Host copy of constant indices, for the shared range check.
std::shared_ptr<const std::vector<int64_t>> ConstantIndices(const KernelInit& init, size_t i) {
  const Tensor* t = i < init.constant_inputs.size() ? init.constant_inputs[i] : nullptr;
  if (t == nullptr || t->location() != Location::kHost) return nullptr;
  return std::make_shared<const std::vector<int64_t>>(ops::ReadIndices(*t));
}

template <typename I>
__device__ __forceinline__ int64_t WrapAndCheck(I raw, int64_t dim, const FaultSink& fault) {
  int64_t k = static_cast<int64_t>(raw);
  if (k < 0) k += dim;
  if (k >= 0 && k < dim) return k;
  fault.Raise(Fault::kIndexOutOfRange);
  return k < 0 ? 0 : dim - 1;
}

template <typename T, typename I>
__global__ void GatherKernel(const T* __restrict__ data, const I* __restrict__ idx, T* __restrict__ out, int64_t n,
                             int64_t n_idx, int64_t dim, int64_t inner, FaultSink fault) {
  MF_GRID_STRIDE_LOOP(i, n) {
    int64_t r = i / inner;
    int64_t c = i - r * inner;
    int64_t o = r / n_idx;
    int64_t j = r - o * n_idx;
    int64_t k = WrapAndCheck(idx[j], dim, fault);
    out[i] = data[(o * dim + k) * inner + c];
  }
}

StatusOr<BoundKernel> GatherFactory(const KernelInit& init) {
  MF_RETURN_IF_ERROR(RequireFixedWidth(init, 0));
  MF_RETURN_IF_ERROR(RequireIndices(init, 1));
  MF_ASSIGN_OR_RETURN(int64_t axis_attr, init.attrs().GetInt("axis", 0));
  auto constant = ConstantIndices(init, 1);
  return Bind(
      [axis_attr, constant](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        const Tensor& data = *in[0];
        const Tensor& indices = *in[1];
        MF_ASSIGN_OR_RETURN(ops::GatherPlan plan, ops::PlanGather(data.shape(), indices.shape(), axis_attr));
        int64_t dim = plan.dim, inner = plan.inner;
        if (constant) {
          for (int64_t v : *constant) MF_RETURN_IF_ERROR(ops::GatherIndex(v, dim).status());
        }
        MF_ASSIGN_OR_RETURN(out[0], AllocateDevice(data.dtype(), plan.shape));
        int64_t n = out[0].num_elements();
        if (n == 0) return Status::Ok();
        if (dim == 0) return InvalidArgument("Gather indices select from an empty dim");
        cudaStream_t s = Current().stream;
        return DispatchBySize(data.dtype(), [&](auto tag) -> Status {
          using T = decltype(tag);
          if (indices.dtype() == DataType::kInt64) {
            GatherKernel<<<BlocksFor(n), kThreads, 0, s>>>(data.data<T>(), indices.data<int64_t>(), out[0].data<T>(), n,
                                                           indices.num_elements(), dim, inner, CurrentFaultSink());
          } else {
            GatherKernel<<<BlocksFor(n), kThreads, 0, s>>>(data.data<T>(), indices.data<int32_t>(), out[0].data<T>(), n,
                                                           indices.num_elements(), dim, inner, CurrentFaultSink());
          }
          MF_CUDA_RETURN_IF_LAUNCH_FAILED();
          return Status::Ok();
        });
      },
      {init.dtype(0)});
}

struct ElementsPlan {
  int rank = 0;
  int axis = 0;
  int64_t idx_dims[kMaxDims] = {};
  int64_t data_strides[kMaxDims] = {};
};

template <typename T, typename I>
__global__ void GatherElementsKernel(const T* __restrict__ data, const I* __restrict__ idx, T* __restrict__ out,
                                     int64_t n, int64_t axis_dim, ElementsPlan p, FaultSink fault) {
  MF_GRID_STRIDE_LOOP(i, n) {
    int64_t rem = i, off = 0;
    for (int d = p.rank - 1; d >= 0; --d) {
      int64_t q = rem / p.idx_dims[d];
      int64_t c = rem - q * p.idx_dims[d];
      off += (d == p.axis ? WrapAndCheck(idx[i], axis_dim, fault) : c) * p.data_strides[d];
      rem = q;
    }
    out[i] = data[off];
  }
}

StatusOr<BoundKernel> GatherElementsFactory(const KernelInit& init) {
  MF_RETURN_IF_ERROR(RequireFixedWidth(init, 0));
  MF_RETURN_IF_ERROR(RequireIndices(init, 1));
  MF_ASSIGN_OR_RETURN(int64_t axis_attr, init.attrs().GetInt("axis", 0));
  auto constant = ConstantIndices(init, 1);
  return Bind(
      [axis_attr, constant](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        const Tensor& data = *in[0];
        const Tensor& idx = *in[1];
        MF_ASSIGN_OR_RETURN(int axis, ops::GatherElementsAxis(data.shape(), idx.shape(), axis_attr));
        int64_t dim = data.dim(axis);
        if (constant) {
          for (int64_t k : *constant) MF_RETURN_IF_ERROR(ops::GatherElementsIndex(k, dim).status());
        }
        MF_ASSIGN_OR_RETURN(out[0], AllocateDevice(data.dtype(), idx.shape()));
        int64_t n = idx.num_elements();
        if (n == 0) return Status::Ok();
        if (dim == 0) return InvalidArgument("GatherElements indices select from an empty dim");
        if (data.rank() > kMaxDims)
          return Unimplemented("GatherElements of rank " + std::to_string(data.rank()) + " on the GPU");
        ElementsPlan p;
        p.rank = data.rank();
        p.axis = axis;
        std::vector<int64_t> strides = RowMajorStrides(data.shape());
        for (int d = 0; d < p.rank; ++d) {
          p.idx_dims[d] = idx.dim(d);
          p.data_strides[d] = strides[static_cast<size_t>(d)];
        }
        cudaStream_t s = Current().stream;
        return DispatchBySize(data.dtype(), [&](auto tag) -> Status {
          using T = decltype(tag);
          if (idx.dtype() == DataType::kInt64) {
            GatherElementsKernel<<<BlocksFor(n), kThreads, 0, s>>>(data.data<T>(), idx.data<int64_t>(),
                                                                   out[0].data<T>(), n, dim, p, CurrentFaultSink());
          } else {
            GatherElementsKernel<<<BlocksFor(n), kThreads, 0, s>>>(data.data<T>(), idx.data<int32_t>(),
                                                                   out[0].data<T>(), n, dim, p, CurrentFaultSink());
          }
          MF_CUDA_RETURN_IF_LAUNCH_FAILED();
          return Status::Ok();
        });
      },
      {init.dtype(0)});
}

using ops::PadMode;

struct PadPlan {
  int rank = 0;
  PadMode mode = PadMode::kConstant;
  int64_t out_dims[kMaxDims] = {};
  int64_t in_dims[kMaxDims] = {};
  int64_t in_strides[kMaxDims] = {};
  int64_t begin[kMaxDims] = {};
};

template <typename T>
__global__ void PadKernel(const T* __restrict__ x, T* __restrict__ out, int64_t n, PadPlan p, T value) {
  MF_GRID_STRIDE_LOOP(i, n) {
    int64_t rem = i, off = 0;
    bool inside = true;
    for (int d = p.rank - 1; d >= 0; --d) {
      int64_t q = rem / p.out_dims[d];
      int64_t o = rem - q * p.out_dims[d];
      rem = q;
      int64_t src = o - p.begin[d], dim = p.in_dims[d];
      if ((src < 0 || src >= dim) && p.mode == PadMode::kConstant) {
        inside = false;
        break;
      }
      src = ops::PadSourceIndex(src, dim, p.mode);
      off += src * p.in_strides[d];
    }
    out[i] = inside ? x[off] : value;
  }
}

// Pad from opset 11: pads and the constant value are (host) inputs; modes constant, reflect, edge.
StatusOr<BoundKernel> PadFactory(const KernelInit& init) {
  MF_RETURN_IF_ERROR(RequireFixedWidth(init, 0));
  MF_RETURN_IF_ERROR(RequireFixedWidth(init, 1));
  if (init.has_input(3)) return init.Error(StatusCode::kUnimplemented, "the axes input of Pad is not supported");
  MF_ASSIGN_OR_RETURN(std::string mode_name, init.attrs().GetString("mode", "constant"));
  StatusOr<PadMode> mode_or = ops::ParsePadMode(mode_name);
  if (!mode_or.ok()) return init.Error(mode_or.status().code(), mode_or.status().message());
  PadMode pad_mode = *mode_or;
  return Bind(
      [pad_mode](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        const Tensor& x = *in[0];
        int rank = x.rank();
        MF_ASSIGN_OR_RETURN(std::vector<int64_t> pads, ReadInts(*in[1], "pads"));
        MF_ASSIGN_OR_RETURN(Shape shape, ops::PadShape(x.shape(), pads, pad_mode));
        // The fill value, as the element's bytes. In FP16 mode a float32 constant_value may come
        // with float16 data: convert it.
        uint64_t value_bits = 0;
        const Tensor* cv = in.size() > 2 ? in[2] : nullptr;
        if (cv && cv->num_elements() > 0) {
          if (cv->location() != Location::kHost)
            return Internal("Pad constant_value must be a host input of the CUDA kernel");
          if (cv->dtype() == x.dtype()) {
            std::memcpy(&value_bits, cv->raw_data(), ElementSize(x.dtype()));
          } else if (cv->dtype() == DataType::kFloat32 && x.dtype() == DataType::kFloat16) {
            __half h = __float2half(cv->data<float>()[0]);
            std::memcpy(&value_bits, &h, sizeof h);
          } else {
            return InvalidArgument("Pad constant_value type differs from the data");
          }
        }
        MF_ASSIGN_OR_RETURN(out[0], AllocateDevice(x.dtype(), shape));
        int64_t n = out[0].num_elements();
        if (n == 0) return Status::Ok();
        if (rank > kMaxDims) return Unimplemented("Pad of rank " + std::to_string(rank) + " on the GPU");
        PadPlan p;
        p.rank = rank;
        p.mode = pad_mode;
        std::vector<int64_t> strides = RowMajorStrides(x.shape());
        for (int d = 0; d < rank; ++d) {
          p.out_dims[d] = shape[static_cast<size_t>(d)];
          p.in_dims[d] = x.dim(d);
          p.in_strides[d] = strides[static_cast<size_t>(d)];
          p.begin[d] = pads[static_cast<size_t>(d)];
        }
        cudaStream_t s = Current().stream;
        return DispatchBySize(x.dtype(), [&](auto tag) -> Status {
          using T = decltype(tag);
          T value;
          std::memcpy(&value, &value_bits, sizeof value);
          PadKernel<<<BlocksFor(n), kThreads, 0, s>>>(x.data<T>(), out[0].data<T>(), n, p, value);
          MF_CUDA_RETURN_IF_LAUNCH_FAILED();
          return Status::Ok();
        });
      },
      {init.dtype(0)});
}

// Keeps element (i, j) of each matrix when j - i >= k (upper) or j - i <= k (lower).
template <typename T>
__global__ void TriluKernel(const T* __restrict__ x, T* __restrict__ out, int64_t n, int64_t rows, int64_t cols,
                            bool upper, int64_t k) {
  MF_GRID_STRIDE_LOOP(e, n) {
    int64_t rc = e % (rows * cols);
    int64_t i = rc / cols, j = rc - i * cols;
    bool keep = upper ? j - i >= k : j - i <= k;
    out[e] = keep ? x[e] : T{};
  }
}

// Trilu: keeps the upper (or lower) triangle of the last two dims, offset by k (host input 1).
StatusOr<BoundKernel> TriluFactory(const KernelInit& init) {
  MF_RETURN_IF_ERROR(RequireFixedWidth(init, 0));
  MF_ASSIGN_OR_RETURN(int64_t upper, init.attrs().GetInt("upper", 1));
  return Bind(
      [upper](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        const Tensor& x = *in[0];
        if (x.rank() < 2) return InvalidArgument("Trilu input must be at least 2-D");
        const Tensor* k_input = in.size() > 1 ? in[1] : nullptr;
        MF_RETURN_IF_ERROR(RequireHost(k_input, "k"));
        MF_ASSIGN_OR_RETURN(int64_t k, ops::TriluK(k_input));
        int64_t rows = x.dim(x.rank() - 2), cols = x.dim(x.rank() - 1);
        int64_t kk = ops::ClampTriluK(k, upper != 0, rows, cols);
        MF_ASSIGN_OR_RETURN(out[0], AllocateDevice(x.dtype(), x.shape()));
        int64_t n = x.num_elements();
        if (n == 0) return Status::Ok();
        cudaStream_t s = Current().stream;
        return DispatchBySize(x.dtype(), [&](auto tag) -> Status {
          using T = decltype(tag);
          TriluKernel<<<BlocksFor(n), kThreads, 0, s>>>(x.data<T>(), out[0].data<T>(), n, rows, cols, upper != 0, kk);
          MF_CUDA_RETURN_IF_LAUNCH_FAILED();
          return Status::Ok();
        });
      },
      {init.dtype(0)});
}

}  // namespace

void RegisterGatherKernels(KernelRegistry* r) {
  r->Register({"Gather", 1, GatherFactory, "any fixed-width"});
  r->Register({"GatherElements", 11, GatherElementsFactory, "any fixed-width"});
  r->Register({"Pad", 11, PadFactory, "any fixed-width", {1, 2, 3}});
  r->Register({"Trilu", 14, TriluFactory, "any fixed-width", {1}});
}

}  // namespace mf::runtime::cuda
