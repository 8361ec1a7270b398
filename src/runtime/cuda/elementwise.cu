// Pointwise operators on the GPU: unary math and activations, Neg/Abs/Not, Clip, Identity,
// Dropout (inference), Cast, and the registration of the whole family (binary ops, Where and
// Softmax live in elementwise_binary.cu and elementwise_softmax.cu). Semantics, opsets and error
// messages mirror src/runtime/cpu/elementwise.cc; what the GPU does not cover is refused with
// UNIMPLEMENTED so the node runs on the CPU.
#include <cmath>
#include <limits>
#include <optional>
#include <type_traits>

#include "runtime/cuda/device_util.cuh"
#include "runtime/cuda/elementwise_internal.cuh"
#include "runtime/ops/cast_codes.h"
#include "runtime/ops/dropout_rules.h"
#include "runtime/ops/input_checks.h"

namespace mf::runtime::cuda {
namespace {

using elementwise::BinaryOp;
using elementwise::RequireDeviceFloat;
using elementwise::TypeName;

// ---- Float unary operators (float32 and float16, computed in float) ----

enum class UnaryOp : uint8_t {
  kRelu,
  kLeakyRelu,
  kElu,
  kSelu,
  kSigmoid,
  kHardSigmoid,
  kHardSwish,
  kTanh,
  kSoftplus,
  kErf,
  kExp,
  kLog,
  kSqrt,
  kReciprocal,
  kFloor,
  kCeil,
  kRound,
  kSin,
  kCos,
};

struct UnaryParams {
  UnaryOp op = UnaryOp::kRelu;
  float alpha = 0.f;  // LeakyRelu slope, Elu/Selu alpha, HardSigmoid alpha
  float beta = 0.f;   // Selu gamma, HardSigmoid beta
};

// The CPU kernels' formulas (activation.h and elementwise.cc), in float.
__device__ __forceinline__ float ApplyUnary(const UnaryParams& p, float x) {
  switch (p.op) {
    case UnaryOp::kRelu:
      return x > 0.f ? x : 0.f;
    case UnaryOp::kLeakyRelu:
      return x >= 0.f ? x : x * p.alpha;
    case UnaryOp::kElu:
      return x >= 0.f ? x : p.alpha * (expf(x) - 1.f);
    case UnaryOp::kSelu:
      return x > 0.f ? p.beta * x : p.beta * (p.alpha * expf(x) - p.alpha);
    case UnaryOp::kSigmoid:
      return 1.f / (1.f + expf(-x));
    case UnaryOp::kHardSigmoid:
      return fmaxf(0.f, fminf(1.f, p.alpha * x + p.beta));
    case UnaryOp::kHardSwish:
      return x * fmaxf(0.f, fminf(1.f, x / 6.f + 0.5f));
    case UnaryOp::kTanh:
      return tanhf(x);
    case UnaryOp::kSoftplus:
      return x > 20.f ? x : log1pf(expf(x));
    case UnaryOp::kErf:
      return erff(x);
    case UnaryOp::kExp:
      return expf(x);
    case UnaryOp::kLog:
      return logf(x);
    case UnaryOp::kSqrt:
      return sqrtf(x);
    case UnaryOp::kReciprocal:
      return 1.f / x;
    case UnaryOp::kFloor:
      return floorf(x);
    case UnaryOp::kCeil:
      return ceilf(x);
    case UnaryOp::kRound:
      return rintf(x);  // half to even, as ONNX specifies
    case UnaryOp::kSin:
      return sinf(x);
    case UnaryOp::kCos:
      return cosf(x);
  }
  return x;
}

template <typename T>
__global__ void UnaryKernel(const T* x, T* y, int64_t n, UnaryParams p) {
  MF_GRID_STRIDE_LOOP(i, n) Store(y, i, ApplyUnary(p, static_cast<float>(Load(x, i))));
}

// Reads the op's attributes at bind time.
using UnaryMaker = StatusOr<UnaryParams> (*)(const KernelInit&);

template <UnaryOp kOp>
StatusOr<UnaryParams> Plain(const KernelInit&) {
  return UnaryParams{kOp, 0.f, 0.f};
}
StatusOr<UnaryParams> LeakyRelu(const KernelInit& init) {
  MF_ASSIGN_OR_RETURN(float alpha, init.attrs().GetFloat("alpha", 0.01f));
  return UnaryParams{UnaryOp::kLeakyRelu, alpha, 0.f};
}
StatusOr<UnaryParams> Elu(const KernelInit& init) {
  MF_ASSIGN_OR_RETURN(float alpha, init.attrs().GetFloat("alpha", 1.f));
  return UnaryParams{UnaryOp::kElu, alpha, 0.f};
}
StatusOr<UnaryParams> Selu(const KernelInit& init) {
  MF_ASSIGN_OR_RETURN(float alpha, init.attrs().GetFloat("alpha", 1.67326319217681884765625f));
  MF_ASSIGN_OR_RETURN(float gamma, init.attrs().GetFloat("gamma", 1.05070102214813232421875f));
  return UnaryParams{UnaryOp::kSelu, alpha, gamma};
}
StatusOr<UnaryParams> HardSigmoid(const KernelInit& init) {
  MF_ASSIGN_OR_RETURN(float alpha, init.attrs().GetFloat("alpha", 0.2f));
  MF_ASSIGN_OR_RETURN(float beta, init.attrs().GetFloat("beta", 0.5f));
  return UnaryParams{UnaryOp::kHardSigmoid, alpha, beta};
}

KernelFactory UnaryFactory(UnaryMaker make) {
  return [make](const KernelInit& init) -> StatusOr<BoundKernel> {
    MF_RETURN_IF_ERROR(RequireDeviceFloat(init, 0));
    auto params = make(init);
    if (!params.ok()) return params.status().WithContext(Graph::Describe(init.node));
    const UnaryParams p = *params;
    const DataType t = init.dtype(0);
    return Bind(
        [p, t](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
          const Tensor& x = *in[0];
          MF_ASSIGN_OR_RETURN(out[0], AllocateDevice(t, x.shape()));
          const int64_t n = x.num_elements();
          if (n == 0) return Status::Ok();
          cudaStream_t s = Current().stream;
          if (t == DataType::kFloat16) {
            UnaryKernel<<<BlocksFor(n), kThreads, 0, s>>>(x.data<__half>(), out[0].data<__half>(), n, p);
          } else {
            UnaryKernel<<<BlocksFor(n), kThreads, 0, s>>>(x.data<float>(), out[0].data<float>(), n, p);
          }
          MF_CUDA_RETURN_IF_LAUNCH_FAILED();
          return Status::Ok();
        },
        {t});
  };
}

// ---- Neg and Abs (floats and signed integers), Not (bool) ----

template <typename T>
__global__ void NegAbsKernel(const T* x, T* y, int64_t n, bool negate) {
  MF_GRID_STRIDE_LOOP(i, n) {
    auto v = Load(x, i);
    if constexpr (std::is_integral_v<T>) {
      // Wraps like numpy for the most negative integer instead of overflowing.
      using U = std::make_unsigned_t<T>;
      const T neg = static_cast<T>(U(0) - static_cast<U>(v));
      y[i] = negate ? neg : (v < 0 ? neg : v);
    } else {
      Store(y, i, negate ? -v : (v < 0 ? -v : v));
    }
  }
}

template <typename T>
Status LaunchNegAbs(const Tensor& x, Tensor& y, bool negate) {
  const int64_t n = x.num_elements();
  if (n == 0) return Status::Ok();
  NegAbsKernel<<<BlocksFor(n), kThreads, 0, Current().stream>>>(x.data<T>(), y.data<T>(), n, negate);
  MF_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

KernelFactory NegAbsFactory(bool negate) {
  return [negate](const KernelInit& init) -> StatusOr<BoundKernel> {
    MF_RETURN_IF_ERROR(ops::RequireDataInput(init, [](DataType t) {
      return t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kFloat64 || t == DataType::kInt8 ||
             t == DataType::kInt16 || t == DataType::kInt32 || t == DataType::kInt64;
    }));
    const DataType t = init.dtype(0);
    return Bind(
        [negate, t](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
          MF_ASSIGN_OR_RETURN(out[0], AllocateDevice(t, in[0]->shape()));
          switch (t) {
            case DataType::kFloat32:
              return LaunchNegAbs<float>(*in[0], out[0], negate);
            case DataType::kFloat16:
              return LaunchNegAbs<__half>(*in[0], out[0], negate);
            case DataType::kFloat64:
              return LaunchNegAbs<double>(*in[0], out[0], negate);
            case DataType::kInt8:
              return LaunchNegAbs<int8_t>(*in[0], out[0], negate);
            case DataType::kInt16:
              return LaunchNegAbs<int16_t>(*in[0], out[0], negate);
            case DataType::kInt32:
              return LaunchNegAbs<int32_t>(*in[0], out[0], negate);
            default:
              return LaunchNegAbs<int64_t>(*in[0], out[0], negate);
          }
        },
        {t});
  };
}

__global__ void NotKernel(const bool* x, bool* y, int64_t n) { MF_GRID_STRIDE_LOOP(i, n) y[i] = !x[i]; }

StatusOr<BoundKernel> NotFactory(const KernelInit& init) {
  if (init.num_inputs() != 1) return init.Error(StatusCode::kInvalidArgument, "wrong number of inputs");
  if (!init.has_input(0) || init.dtype(0) != DataType::kBool) {
    return init.Error(StatusCode::kInvalidArgument, "inputs must be bool");
  }
  return Bind(
      [](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        MF_ASSIGN_OR_RETURN(out[0], AllocateDevice(DataType::kBool, in[0]->shape()));
        const int64_t n = in[0]->num_elements();
        if (n == 0) return Status::Ok();
        NotKernel<<<BlocksFor(n), kThreads, 0, Current().stream>>>(in[0]->data<bool>(), out[0].data<bool>(), n);
        MF_CUDA_RETURN_IF_LAUNCH_FAILED();
        return Status::Ok();
      },
      {DataType::kBool});
}

// ---- Clip ----

template <typename T>
__global__ void ClipKernel(const T* x, T* y, int64_t n, float lo, float hi) {
  MF_GRID_STRIDE_LOOP(i, n) {
    // std::min(std::max(x, lo), hi) as the CPU computes it: NaN stays NaN.
    float v = static_cast<float>(Load(x, i));
    v = v < lo ? lo : v;
    v = hi < v ? hi : v;
    Store(y, i, v);
  }
}

// A Clip bound (host tensor): float32, or float16 when the executor stored it as the device
// float type.
StatusOr<float> ReadBound(const Tensor& t) {
  if (t.location() != Location::kHost) return Internal("Clip min/max must be host tensors");
  if (t.num_elements() != 1) return InvalidArgument("Clip min/max must be scalars");
  switch (t.dtype()) {
    case DataType::kFloat32:
      return t.data<float>()[0];
    case DataType::kFloat16:
      return __half2float(t.data<__half>()[0]);
    default:
      return InvalidArgument("Clip min/max must be float, not " + TypeName(t.dtype()));
  }
}

// Before opset 11 min/max are attributes; from 11 they are optional scalar inputs 1 and 2,
// read on the host (KernelDef::host_inputs).
StatusOr<BoundKernel> ClipFactory(const KernelInit& init) {
  MF_RETURN_IF_ERROR(RequireDeviceFloat(init, 0));
  float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
  if (init.opset < 11) {
    MF_ASSIGN_OR_RETURN(lo, init.attrs().GetFloat("min", lo));
    MF_ASSIGN_OR_RETURN(hi, init.attrs().GetFloat("max", hi));
  }
  for (size_t i = 1; i < init.num_inputs(); ++i) {
    if (init.has_input(i) && !IsDeviceFloat(init.dtype(i))) {
      return init.Error(StatusCode::kUnimplemented, "min/max must be float32");
    }
  }
  const DataType t = init.dtype(0);
  return Bind(
      [lo, hi, t](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        float mn = lo, mx = hi;
        for (size_t i = 1; i < in.size() && i < 3; ++i) {
          if (!in[i]) continue;
          MF_ASSIGN_OR_RETURN(float bound, ReadBound(*in[i]));
          (i == 1 ? mn : mx) = bound;
        }
        const Tensor& x = *in[0];
        MF_ASSIGN_OR_RETURN(out[0], AllocateDevice(t, x.shape()));
        const int64_t n = x.num_elements();
        if (n == 0) return Status::Ok();
        cudaStream_t s = Current().stream;
        if (t == DataType::kFloat16) {
          ClipKernel<<<BlocksFor(n), kThreads, 0, s>>>(x.data<__half>(), out[0].data<__half>(), n, mn, mx);
        } else {
          ClipKernel<<<BlocksFor(n), kThreads, 0, s>>>(x.data<float>(), out[0].data<float>(), n, mn, mx);
        }
        MF_CUDA_RETURN_IF_LAUNCH_FAILED();
        return Status::Ok();
      },
      {t});
}

// ---- Identity, Dropout (inference), Cast ----

StatusOr<BoundKernel> IdentityFactory(const KernelInit& init) {
  if (!init.has_input(0)) return init.Error(StatusCode::kInvalidArgument, "missing input 0");
  const DataType t = init.dtype(0);
  if (t == DataType::kString)
    return init.Error(StatusCode::kUnimplemented, "string tensors cannot live in device memory");
  std::vector<DataType> outs{t};
  MF_ASSIGN_OR_RETURN(bool dropout_mask, ops::ReadDropoutMaskOutput(init));
  if (dropout_mask) outs.push_back(DataType::kBool);
  return Bind(
      [dropout_mask](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        MF_ASSIGN_OR_RETURN(out[0], CopyOnDevice(*in[0], in[0]->shape()));
        if (dropout_mask) {
          // Inference keeps every element: the mask is all true (bool is one byte of value 1).
          MF_ASSIGN_OR_RETURN(out[1], AllocateDevice(DataType::kBool, in[0]->shape()));
          if (out[1].byte_size()) {
            MF_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out[1].raw_data(), 1, out[1].byte_size(), Current().stream));
          }
        }
        return Status::Ok();
      },
      outs);
}

StatusOr<BoundKernel> CastFactory(const KernelInit& init) {
  if (!init.has_input(0)) return init.Error(StatusCode::kInvalidArgument, "missing input 0");
  MF_ASSIGN_OR_RETURN(DataType to, ops::ReadCastTarget(init));
  const DataType from = init.dtype(0);
  if (from == DataType::kString || from == DataType::kBFloat16) {
    return init.Error(StatusCode::kUnimplemented, "cast from " + TypeName(from) + " is not supported");
  }
  // FLOAT becomes the device float type (float16 in FP16 mode).
  const DataType dst = to == DataType::kFloat32 ? DeviceFloatType(init.precision) : to;
  return Bind(
      [dst](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        MF_ASSIGN_OR_RETURN(out[0], AllocateDevice(dst, in[0]->shape()));
        return ConvertOnDevice(*in[0], &out[0]);
      },
      {dst});
}

}  // namespace

void RegisterElementwiseKernels(KernelRegistry* r) {
  namespace ew = elementwise;
  const std::pair<const char*, BinaryOp> binary[] = {{"Add", BinaryOp::kAdd},
                                                     {"Sub", BinaryOp::kSub},
                                                     {"Mul", BinaryOp::kMul},
                                                     {"Div", BinaryOp::kDiv},
                                                     {"Pow", BinaryOp::kPow},
                                                     {"Equal", BinaryOp::kEqual},
                                                     {"Greater", BinaryOp::kGreater},
                                                     {"Less", BinaryOp::kLess},
                                                     {"GreaterOrEqual", BinaryOp::kGreaterOrEqual},
                                                     {"LessOrEqual", BinaryOp::kLessOrEqual}};
  // Opset 7 introduced numpy broadcasting (earlier versions used the `broadcast` attribute).
  for (const auto& [name, op] : binary)
    r->Register({name, 7, ew::BinaryFactory(op), "float, float16, double, int32, int64", {}});
  const std::pair<const char*, UnaryMaker> unary[] = {{"Relu", Plain<UnaryOp::kRelu>},
                                                      {"LeakyRelu", LeakyRelu},
                                                      {"Elu", Elu},
                                                      {"Selu", Selu},
                                                      {"Sigmoid", Plain<UnaryOp::kSigmoid>},
                                                      {"HardSigmoid", HardSigmoid},
                                                      {"Tanh", Plain<UnaryOp::kTanh>},
                                                      {"Sqrt", Plain<UnaryOp::kSqrt>},
                                                      {"Exp", Plain<UnaryOp::kExp>},
                                                      {"Log", Plain<UnaryOp::kLog>},
                                                      {"Reciprocal", Plain<UnaryOp::kReciprocal>},
                                                      {"Floor", Plain<UnaryOp::kFloor>},
                                                      {"Ceil", Plain<UnaryOp::kCeil>}};
  for (const auto& [name, make] : unary) r->Register({name, 6, UnaryFactory(make), "float, float16", {}});
  r->Register({"Erf", 9, UnaryFactory(Plain<UnaryOp::kErf>), "float, float16", {}});
  r->Register({"Round", 11, UnaryFactory(Plain<UnaryOp::kRound>), "float, float16", {}});
  r->Register({"Sin", 7, UnaryFactory(Plain<UnaryOp::kSin>), "float, float16", {}});
  r->Register({"Cos", 7, UnaryFactory(Plain<UnaryOp::kCos>), "float, float16", {}});
  r->Register({"Softplus", 1, UnaryFactory(Plain<UnaryOp::kSoftplus>), "float, float16", {}});
  r->Register({"HardSwish", 14, UnaryFactory(Plain<UnaryOp::kHardSwish>), "float, float16", {}});
  r->Register({"Neg", 6, NegAbsFactory(true), "float, float16, double, int8-int64", {}});
  r->Register({"Abs", 6, NegAbsFactory(false), "float, float16, double, int8-int64", {}});
  r->Register({"Not", 1, NotFactory, "bool", {}});
  r->Register({"And", 7, ew::LogicalFactory(BinaryOp::kAnd), "bool", {}});
  r->Register({"Or", 7, ew::LogicalFactory(BinaryOp::kOr), "bool", {}});
  r->Register({"Xor", 7, ew::LogicalFactory(BinaryOp::kXor), "bool", {}});
  r->Register({"Clip", 6, ClipFactory, "float, float16", {1, 2}});
  r->Register({"PRelu", 7, ew::PReluFactory, "float, float16", {}});
  // Opset 8 introduced multidirectional broadcasting for the variadic ops.
  r->Register({"Max", 8, ew::VariadicFactory(BinaryOp::kMax, false), "float, float16, double, int32, int64", {}});
  r->Register({"Min", 8, ew::VariadicFactory(BinaryOp::kMin, false), "float, float16, double, int32, int64", {}});
  r->Register({"Sum", 8, ew::VariadicFactory(BinaryOp::kAdd, false), "float, float16, double, int32, int64", {}});
  r->Register({"Mean", 8, ew::VariadicFactory(BinaryOp::kAdd, true), "float, float16, double", {}});
  r->Register({"Where", 9, ew::WhereFactory, "any fixed-width", {}});
  r->Register({"Identity", 1, IdentityFactory, "any fixed-width", {}});
  r->Register({"Dropout", 1, IdentityFactory, "any fixed-width (inference: identity)", {}});
  r->Register({"Cast", 6, CastFactory, "numeric, bool", {}});
  r->Register({"Softmax", 1, [](const KernelInit& i) { return ew::SoftmaxFactory(i, false); }, "float, float16", {}});
  r->Register({"LogSoftmax", 1, [](const KernelInit& i) { return ew::SoftmaxFactory(i, true); }, "float, float16", {}});
}

}  // namespace mf::runtime::cuda
