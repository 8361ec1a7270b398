#include <string>
#include <vector>

#include "runtime/cuda/cuda_common.h"
#include "runtime/cuda/device_memory.h"
#include "runtime/cuda/device_util.cuh"

namespace mf::runtime::cuda {
namespace {

thread_local const RunContext* g_current = nullptr;

void FreeAsync(void* p) {
  // Stream-ordered: a run frees its intermediates on its own stream (inside a capture this
  // becomes a free node of the graph).
  cudaFreeAsync(p, g_current ? g_current->stream : nullptr);
}
void FreeSync(void* p) { FreeCounted(p); }

StatusOr<size_t> CheckedBytes(DataType dtype, const Shape& shape) {
  if (dtype == DataType::kString) return Unimplemented("string tensors cannot live in device memory");
  int64_t n = NumElements(shape);
  if (n < 0) return InvalidArgument("invalid tensor shape " + ShapeToString(shape));
  size_t elem = ElementSize(dtype);
  if (static_cast<uint64_t>(n) > kMaxTensorBytes / elem) {
    return ResourceExhausted("tensor of shape " + ShapeToString(shape) + " exceeds the " +
                             std::to_string(kMaxTensorBytes >> 20) + " MiB limit");
  }
  return static_cast<size_t>(n) * elem;
}

template <typename From, typename To>
__global__ void ConvertKernel(const From* in, To* out, int64_t n) {
  MF_GRID_STRIDE_LOOP(i, n) {
    if constexpr (std::is_same_v<To, bool>) {
      out[i] = Load(in, i) != 0;
    } else {
      Store(out, i, Load(in, i));
    }
  }
}

template <typename From>
Status ConvertFrom(const From* in, const Tensor& from, Tensor* to) {
  int64_t n = from.num_elements();
  if (n == 0) return Status::Ok();
  cudaStream_t s = Current().stream;
  auto launch = [&](auto* out) {
    ConvertKernel<<<BlocksFor(n), kThreads, 0, s>>>(in, out, n);
    return CudaError(cudaGetLastError(), "convert");
  };
  switch (to->dtype()) {
    case DataType::kFloat32:
      return launch(to->data<float>());
    case DataType::kFloat16:
      return launch(to->data<__half>());
    case DataType::kFloat64:
      return launch(to->data<double>());
    case DataType::kInt8:
      return launch(to->data<int8_t>());
    case DataType::kInt16:
      return launch(to->data<int16_t>());
    case DataType::kInt32:
      return launch(to->data<int32_t>());
    case DataType::kInt64:
      return launch(to->data<int64_t>());
    case DataType::kUInt8:
      return launch(to->data<uint8_t>());
    case DataType::kUInt16:
      return launch(to->data<uint16_t>());
    case DataType::kUInt32:
      return launch(to->data<uint32_t>());
    case DataType::kUInt64:
      return launch(to->data<uint64_t>());
    case DataType::kBool:
      return launch(to->data<bool>());
    default:
      return Unimplemented("conversion to " + std::string(DataTypeName(to->dtype())) + " on the GPU");
  }
}

template <typename T>
__global__ void ActivationKernel(T* data, int64_t n, Activation act) {
  MF_GRID_STRIDE_LOOP(i, n) {
    float x = static_cast<float>(Load(data, i));
    switch (act.kind) {
      case Activation::kRelu:
        x = x > 0.f ? x : 0.f;
        break;
      case Activation::kLeakyRelu:
        x = x >= 0.f ? x : act.alpha * x;
        break;
      case Activation::kSigmoid:
        x = 1.f / (1.f + expf(-x));
        break;
      case Activation::kTanh:
        x = tanhf(x);
        break;
      case Activation::kClip:
        x = fminf(fmaxf(x, act.alpha), act.beta);
        break;
      case Activation::kNone:
        break;
    }
    Store(data, i, x);
  }
}

}  // namespace

const RunContext& Current() {
  static const RunContext kNone{};
  return g_current ? *g_current : kNone;
}

ScopedRunContext::ScopedRunContext(const RunContext* context) : previous_(g_current) { g_current = context; }
ScopedRunContext::~ScopedRunContext() { g_current = previous_; }

Status CudaError(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return Status::Ok();
  std::string message = std::string(what) + ": " + cudaGetErrorName(error) + " (" + cudaGetErrorString(error) + ")";
  if (error == cudaErrorMemoryAllocation) return ResourceExhausted("GPU out of memory: " + message);
  return Internal(message);
}

Status CudnnError(cudnnStatus_t status, const char* what) {
  if (status == CUDNN_STATUS_SUCCESS) return Status::Ok();
  std::string message = std::string(what) + ": " + cudnnGetErrorString(status);
  if (status == CUDNN_STATUS_ALLOC_FAILED) return ResourceExhausted("GPU out of memory: " + message);
  if (status == CUDNN_STATUS_NOT_SUPPORTED) return Unimplemented(message);
  return Internal(message);
}

Status CublasError(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  // cublasGetStatusName lives in libcublas, which we do not link: name the usual ones here.
  const char* name = "CUBLAS_STATUS_UNKNOWN";
  switch (status) {
    case CUBLAS_STATUS_NOT_INITIALIZED:
      name = "CUBLAS_STATUS_NOT_INITIALIZED";
      break;
    case CUBLAS_STATUS_ALLOC_FAILED:
      name = "CUBLAS_STATUS_ALLOC_FAILED";
      break;
    case CUBLAS_STATUS_INVALID_VALUE:
      name = "CUBLAS_STATUS_INVALID_VALUE";
      break;
    case CUBLAS_STATUS_ARCH_MISMATCH:
      name = "CUBLAS_STATUS_ARCH_MISMATCH";
      break;
    case CUBLAS_STATUS_EXECUTION_FAILED:
      name = "CUBLAS_STATUS_EXECUTION_FAILED";
      break;
    case CUBLAS_STATUS_INTERNAL_ERROR:
      name = "CUBLAS_STATUS_INTERNAL_ERROR";
      break;
    case CUBLAS_STATUS_NOT_SUPPORTED:
      name = "CUBLAS_STATUS_NOT_SUPPORTED";
      break;
    default:
      break;
  }
  std::string message = std::string(what) + ": " + name + " (" + std::to_string(static_cast<int>(status)) + ")";
  if (status == CUBLAS_STATUS_ALLOC_FAILED) return ResourceExhausted("GPU out of memory: " + message);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED) return Unimplemented(message);
  return Internal(message);
}

StatusOr<Tensor> AllocateDevice(DataType dtype, Shape shape) {
  MF_ASSIGN_OR_RETURN(size_t bytes, CheckedBytes(dtype, shape));
  void* p = nullptr;
  // A 0-byte tensor still gets a distinct (small) buffer: kernels may take its address.
  const size_t size = bytes == 0 ? 256 : bytes;
  MF_RETURN_IF_ERROR(CheckGpuMemoryBudget(size));
  MF_CUDA_RETURN_IF_ERROR(cudaMallocAsync(&p, size, Current().stream));
  return Tensor::Adopt(dtype, std::move(shape), p, Location::kCuda, &FreeAsync);
}

const char* FaultText(Fault fault) {
  switch (fault) {
    case Fault::kNone:
      return "no fault";
    case Fault::kDivisionByZero:
      return "integer division by zero";
    case Fault::kDivisionOverflow:
      return "integer division overflows";
    case Fault::kIndexOutOfRange:
      return "an index is out of range";
  }
  return "an unknown device fault";
}

StatusOr<Tensor> AllocateWorkspace(size_t bytes) {
  if (bytes == 0) return Tensor();
  return AllocateDevice(DataType::kInt8, Shape{static_cast<int64_t>(bytes)});
}

StatusOr<Tensor> UploadConstant(const Tensor& host, DataType as) {
  if (host.location() != Location::kHost) return Internal("UploadConstant takes a host tensor");
  MF_ASSIGN_OR_RETURN(size_t bytes, CheckedBytes(as, host.shape()));
  std::vector<__half> converted;
  const void* src = host.raw_data();
  if (as != host.dtype()) {
    if (host.dtype() != DataType::kFloat32 || as != DataType::kFloat16) {
      return Internal("UploadConstant converts only float32 to float16");
    }
    converted.resize(static_cast<size_t>(host.num_elements()));
    const float* f = host.data<float>();
    for (size_t i = 0; i < converted.size(); ++i) converted[i] = __float2half(f[i]);
    src = converted.data();
  }
  MF_ASSIGN_OR_RETURN(void* p, MallocCounted(bytes == 0 ? 256 : bytes));
  Tensor t = Tensor::Adopt(as, host.shape(), p, Location::kCuda, &FreeSync);
  if (bytes) MF_CUDA_RETURN_IF_ERROR(cudaMemcpy(p, src, bytes, cudaMemcpyHostToDevice));
  return StatusOr<Tensor>(std::move(t));  // nvcc's front end does not apply the implicit move
}

StatusOr<Tensor> CopyOnDevice(const Tensor& device, Shape shape) {
  if (NumElements(shape) != device.num_elements()) {
    return InvalidArgument("cannot reshape " + ShapeToString(device.shape()) + " to " + ShapeToString(shape));
  }
  MF_ASSIGN_OR_RETURN(Tensor out, AllocateDevice(device.dtype(), std::move(shape)));
  if (device.byte_size()) {
    MF_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(out.raw_data(), device.raw_data(), device.byte_size(),
                                            cudaMemcpyDeviceToDevice, Current().stream));
  }
  return StatusOr<Tensor>(std::move(out));
}

Status ConvertOnDevice(const Tensor& from, Tensor* to) {
  if (from.num_elements() != to->num_elements()) return Internal("ConvertOnDevice: element counts differ");
  if (from.dtype() == to->dtype()) {
    if (!from.byte_size()) return Status::Ok();
    return CudaError(
        cudaMemcpyAsync(to->raw_data(), from.raw_data(), from.byte_size(), cudaMemcpyDeviceToDevice, Current().stream),
        "copy");
  }
  switch (from.dtype()) {
    case DataType::kFloat32:
      return ConvertFrom(from.data<float>(), from, to);
    case DataType::kFloat16:
      return ConvertFrom(from.data<__half>(), from, to);
    case DataType::kFloat64:
      return ConvertFrom(from.data<double>(), from, to);
    case DataType::kInt8:
      return ConvertFrom(from.data<int8_t>(), from, to);
    case DataType::kInt16:
      return ConvertFrom(from.data<int16_t>(), from, to);
    case DataType::kInt32:
      return ConvertFrom(from.data<int32_t>(), from, to);
    case DataType::kInt64:
      return ConvertFrom(from.data<int64_t>(), from, to);
    case DataType::kUInt8:
      return ConvertFrom(from.data<uint8_t>(), from, to);
    case DataType::kUInt16:
      return ConvertFrom(from.data<uint16_t>(), from, to);
    case DataType::kUInt32:
      return ConvertFrom(from.data<uint32_t>(), from, to);
    case DataType::kUInt64:
      return ConvertFrom(from.data<uint64_t>(), from, to);
    case DataType::kBool:
      return ConvertFrom(from.data<bool>(), from, to);
    default:
      return Unimplemented("conversion from " + std::string(DataTypeName(from.dtype())) + " on the GPU");
  }
}

StatusOr<Activation> ActivationFromNode(const Node& node) {
  Activation act;
  act.alpha = node.fused_alpha;
  act.beta = node.fused_beta;
  const std::string& a = node.fused_activation;
  if (a.empty())
    act.kind = Activation::kNone;
  else if (a == "Relu")
    act.kind = Activation::kRelu;
  else if (a == "LeakyRelu")
    act.kind = Activation::kLeakyRelu;
  else if (a == "Sigmoid")
    act.kind = Activation::kSigmoid;
  else if (a == "Tanh")
    act.kind = Activation::kTanh;
  else if (a == "Clip")
    act.kind = Activation::kClip;
  else
    return Unimplemented(Graph::Describe(node) + ": fused activation " + a + " on the GPU");
  return act;
}

Status ApplyActivation(const Activation& act, DataType dtype, void* data, int64_t n) {
  if (act.kind == Activation::kNone || n == 0) return Status::Ok();
  cudaStream_t s = Current().stream;
  if (dtype == DataType::kFloat32) {
    ActivationKernel<<<BlocksFor(n), kThreads, 0, s>>>(static_cast<float*>(data), n, act);
  } else if (dtype == DataType::kFloat16) {
    ActivationKernel<<<BlocksFor(n), kThreads, 0, s>>>(static_cast<__half*>(data), n, act);
  } else {
    return Internal("fused activation on a non-float tensor");
  }
  return CudaError(cudaGetLastError(), "activation");
}

StatusOr<Broadcast> MakeBroadcast(const Shape& in, const Shape& out) {
  if (out.size() > static_cast<size_t>(kMaxDims)) {
    return Unimplemented("tensors of rank " + std::to_string(out.size()) + " on the GPU (at most " +
                         std::to_string(kMaxDims) + ")");
  }
  if (in.size() > out.size())
    return InvalidArgument("cannot broadcast " + ShapeToString(in) + " to " + ShapeToString(out));
  Broadcast b;
  b.rank = static_cast<int>(out.size());
  int64_t stride = 1;
  size_t lead = out.size() - in.size();
  for (size_t i = out.size(); i-- > 0;) {
    b.out_dims[i] = out[i] == 0 ? 1 : out[i];
    int64_t d = i < lead ? 1 : in[i - lead];
    if (d != out[i] && d != 1) {
      return InvalidArgument("cannot broadcast " + ShapeToString(in) + " to " + ShapeToString(out));
    }
    b.in_strides[i] = d == 1 ? 0 : stride;
    stride *= d;
  }
  return b;
}

}  // namespace mf::runtime::cuda
