// Pointwise operators: unary math and activations, broadcasting binary arithmetic and
// comparisons, and Where.
#include <algorithm>
#include <cmath>
#include <limits>

#include "runtime/cpu/activation.h"
#include "runtime/cpu/cpu_common.h"
#include "runtime/ops/input_checks.h"

namespace mf::runtime::cpu {

StatusOr<Activation> ActivationFromName(const std::string& name) {
  if (name.empty()) return Activation::kNone;
  if (name == "Relu") return Activation::kRelu;
  if (name == "LeakyRelu") return Activation::kLeakyRelu;
  if (name == "Sigmoid") return Activation::kSigmoid;
  if (name == "Tanh") return Activation::kTanh;
  if (name == "Clip") return Activation::kClip;
  if (name == "Gelu") return Activation::kGelu;
  return InvalidArgument("unknown fused activation '" + name + "'");
}

// Compiled for AVX-512 and AVX2 as well (MF_CPU_CLONES).
MF_CPU_CLONES void GeluRows(const float* x, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = Gelu(x[i]);
}

void ApplyActivation(const ActivationParams& p, float* data, int64_t n) {
  if (p.kind == Activation::kNone) return;
  ParallelFor(n, 1 << 14, [&](int64_t b, int64_t e) {
    if (p.kind == Activation::kGelu) return GeluRows(data + b, data + b, e - b);
    for (int64_t i = b; i < e; ++i) data[i] = Activate(p, data[i]);
  });
}

namespace {

// Calls fn(out_offset, in_offsets, count) for each innermost row of a broadcast over
// `out_shape`; in_offsets[k] is where input k's row starts and strides[k].back() its step.
template <size_t N, typename Fn>
void ForEachBroadcastRow(const Shape& out_shape, const std::array<std::vector<int64_t>, N>& strides, Fn&& fn) {
  int rank = static_cast<int>(out_shape.size());
  int64_t inner = rank == 0 ? 1 : out_shape.back();
  int64_t total = NumElements(out_shape);
  if (total <= 0 || inner == 0) return;
  int64_t rows = total / inner;
  ParallelFor(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(inner, 1)), [&](int64_t rb, int64_t re) {
    std::array<int64_t, N> offsets;
    for (int64_t row = rb; row < re; ++row) {
      offsets.fill(0);
      int64_t rem = row;
      for (int d = rank - 2; d >= 0; --d) {
        int64_t idx = rem % out_shape[static_cast<size_t>(d)];
        rem /= out_shape[static_cast<size_t>(d)];
        for (size_t k = 0; k < N; ++k) offsets[k] += idx * strides[k][static_cast<size_t>(d)];
      }
      fn(row * inner, offsets, inner);
    }
  });
}

template <typename T, typename R, typename Op>
Status BinaryBroadcast(const Tensor& a, const Tensor& b, DataType out_dtype, Tensor& out, Op op) {
  MF_ASSIGN_OR_RETURN(Shape shape, BroadcastShapes(a.shape(), b.shape()));
  MF_ASSIGN_OR_RETURN(out, Tensor::AllocateUninitialized(out_dtype, shape));
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  R* po = out.data<R>();
  if (a.shape() == b.shape()) {
    ParallelFor(out.num_elements(), 1 << 14, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) po[i] = op(pa[i], pb[i]);
    });
    return Status::Ok();
  }
  std::array<std::vector<int64_t>, 2> strides{BroadcastStrides(a.shape(), shape), BroadcastStrides(b.shape(), shape)};
  int64_t sa = shape.empty() ? 0 : strides[0].back(), sb = shape.empty() ? 0 : strides[1].back();
  ForEachBroadcastRow<2>(shape, strides, [&](int64_t o, const std::array<int64_t, 2>& in, int64_t n) {
    const T* ra = pa + in[0];
    const T* rb = pb + in[1];
    R* ro = po + o;
    if (sa == 1 && sb == 1) {
      for (int64_t i = 0; i < n; ++i) ro[i] = op(ra[i], rb[i]);
    } else if (sa == 1) {
      T vb = rb[0];
      for (int64_t i = 0; i < n; ++i) ro[i] = op(ra[i], vb);
    } else if (sb == 1) {
      T va = ra[0];
      for (int64_t i = 0; i < n; ++i) ro[i] = op(va, rb[i]);
    } else {
      R v = op(ra[0], rb[0]);
      for (int64_t i = 0; i < n; ++i) ro[i] = v;
    }
  });
  return Status::Ok();
}

enum class BinaryOp {
  kAdd,
  kSub,
  kMul,
  kDiv,
  kPow,
  kEqual,
  kGreater,
  kLess,
  kGreaterOrEqual,
  kLessOrEqual,
  kMax,
  kMin,
  kMod,
  kFMod
};

template <typename T>
Status RunArithmetic(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  DataType dt = a.dtype();
  switch (op) {
    case BinaryOp::kAdd:
      return BinaryBroadcast<T, T>(a, b, dt, out, [](T x, T y) { return static_cast<T>(x + y); });
    case BinaryOp::kSub:
      return BinaryBroadcast<T, T>(a, b, dt, out, [](T x, T y) { return static_cast<T>(x - y); });
    case BinaryOp::kMul:
      return BinaryBroadcast<T, T>(a, b, dt, out, [](T x, T y) { return static_cast<T>(x * y); });
    case BinaryOp::kMax:
      return BinaryBroadcast<T, T>(a, b, dt, out, [](T x, T y) { return x < y ? y : x; });
    case BinaryOp::kMin:
      return BinaryBroadcast<T, T>(a, b, dt, out, [](T x, T y) { return y < x ? y : x; });
    case BinaryOp::kDiv:
      if constexpr (std::is_integral_v<T>) {
        // Integer division by zero (or INT_MIN / -1) is undefined behaviour in C++: refuse it.
        const T* pb = b.data<T>();
        for (int64_t i = 0; i < b.num_elements(); ++i) {
          if (pb[i] == 0) return InvalidArgument("integer division by zero");
          if constexpr (std::is_signed_v<T>) {
            if (pb[i] == T(-1)) {
              const T* pa = a.data<T>();
              for (int64_t j = 0; j < a.num_elements(); ++j) {
                if (pa[j] == std::numeric_limits<T>::min()) return InvalidArgument("integer division overflows");
              }
            }
          }
        }
      }
      return BinaryBroadcast<T, T>(a, b, dt, out, [](T x, T y) { return static_cast<T>(x / y); });
    case BinaryOp::kMod:
    case BinaryOp::kFMod:
      if constexpr (std::is_integral_v<T>) {
        const T* pb = b.data<T>();
        for (int64_t i = 0; i < b.num_elements(); ++i) {
          if (pb[i] == 0) return InvalidArgument("integer modulo by zero");
        }
        // x % -1 is 0, but INT_MIN % -1 is undefined behaviour in C++: answer it without dividing.
        if (op == BinaryOp::kFMod) {
          return BinaryBroadcast<T, T>(a, b, dt, out, [](T x, T y) {
            if constexpr (std::is_signed_v<T>) {
              if (y == T(-1)) return T(0);
            }
            return static_cast<T>(x % y);
          });
        }
        // fmod=0: the result takes the divisor's sign (Python's %).
        return BinaryBroadcast<T, T>(a, b, dt, out, [](T x, T y) {
          if constexpr (std::is_signed_v<T>) {
            if (y == T(-1)) return T(0);
            T r = static_cast<T>(x % y);
            return (r != 0 && ((r < 0) != (y < 0))) ? static_cast<T>(r + y) : r;
          }
          return static_cast<T>(x % y);
        });
      } else {
        // Floats only with fmod=1 (checked at bind time): C's fmod, the dividend's sign.
        return BinaryBroadcast<T, T>(a, b, dt, out, [](T x, T y) { return static_cast<T>(std::fmod(x, y)); });
      }
    case BinaryOp::kPow:
      return BinaryBroadcast<T, T>(a, b, dt, out, [](T x, T y) {
        return static_cast<T>(std::pow(static_cast<double>(x), static_cast<double>(y)));
      });
    case BinaryOp::kEqual:
      return BinaryBroadcast<T, bool>(a, b, DataType::kBool, out, [](T x, T y) { return x == y; });
    case BinaryOp::kGreater:
      return BinaryBroadcast<T, bool>(a, b, DataType::kBool, out, [](T x, T y) { return x > y; });
    case BinaryOp::kLess:
      return BinaryBroadcast<T, bool>(a, b, DataType::kBool, out, [](T x, T y) { return x < y; });
    case BinaryOp::kGreaterOrEqual:
      return BinaryBroadcast<T, bool>(a, b, DataType::kBool, out, [](T x, T y) { return x >= y; });
    case BinaryOp::kLessOrEqual:
      return BinaryBroadcast<T, bool>(a, b, DataType::kBool, out, [](T x, T y) { return x <= y; });
  }
  return Internal("unknown binary op");
}

// Float Pow with a float exponent is the common case (x^2 in LayerNorm-style graphs); fast path.
Status PowFloat(const Tensor& a, const Tensor& b, Tensor& out) {
  return BinaryBroadcast<float, float>(a, b, DataType::kFloat32, out, [](float x, float y) {
    return y == 2.f ? x * x : (y == 0.5f ? std::sqrt(x) : std::pow(x, y));
  });
}

bool IsComparison(BinaryOp op) {
  return op == BinaryOp::kEqual || op == BinaryOp::kGreater || op == BinaryOp::kLess ||
         op == BinaryOp::kGreaterOrEqual || op == BinaryOp::kLessOrEqual;
}

KernelFactory BinaryFactory(BinaryOp op) {
  return [op](const KernelInit& init) -> StatusOr<BoundKernel> {
    if (init.num_inputs() != 2 || !init.has_input(0) || !init.has_input(1)) {
      return init.Error(StatusCode::kInvalidArgument, "needs exactly two inputs");
    }
    DataType ta = init.dtype(0), tb = init.dtype(1);
    bool pow_mixed = op == BinaryOp::kPow && IsNumeric(ta) && IsNumeric(tb);
    if (ta != tb && !pow_mixed) {
      return init.Error(StatusCode::kInvalidArgument, "input types differ: " + std::string(DataTypeName(ta)) + " and " +
                                                          std::string(DataTypeName(tb)));
    }
    bool bool_ok = op == BinaryOp::kEqual && ta == DataType::kBool;
    if (!IsNumeric(ta) && !bool_ok) {
      return init.Error(StatusCode::kUnimplemented,
                        "element type " + std::string(DataTypeName(ta)) + " is not supported");
    }
    DataType out_type = IsComparison(op) ? DataType::kBool : ta;
    return Bind(
        [op, ta, tb](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
          if (op == BinaryOp::kPow && ta == DataType::kFloat32 && tb == DataType::kFloat32) {
            return PowFloat(*in[0], *in[1], out[0]);
          }
          if (ta != tb) {
            // Pow with a differently typed exponent: compute in double, store in the base type.
            Tensor b64;
            MF_ASSIGN_OR_RETURN(b64, Tensor::AllocateUninitialized(ta, in[1]->shape()));
            MF_RETURN_IF_ERROR(DispatchNumeric(tb, [&](auto src) -> Status {
              using S = decltype(src);
              return DispatchNumeric(ta, [&](auto dst) -> Status {
                using D = decltype(dst);
                for (int64_t i = 0; i < b64.num_elements(); ++i) b64.data<D>()[i] = static_cast<D>(in[1]->data<S>()[i]);
                return Status::Ok();
              });
            }));
            return DispatchNumeric(ta, [&](auto t) { return RunArithmetic<decltype(t)>(op, *in[0], b64, out[0]); });
          }
          if (ta == DataType::kBool) return RunArithmetic<uint8_t>(op, *in[0], *in[1], out[0]);
          return DispatchNumeric(ta, [&](auto t) { return RunArithmetic<decltype(t)>(op, *in[0], *in[1], out[0]); });
        },
        {out_type});
  };
}

// Mod: fmod=0 (integers only) follows the divisor's sign, fmod=1 is C's fmod.
StatusOr<BoundKernel> ModFactory(const KernelInit& init) {
  MF_ASSIGN_OR_RETURN(int64_t fmod, init.attrs().GetInt("fmod", 0));
  if (fmod != 0 && fmod != 1) return init.Error(StatusCode::kInvalidArgument, "fmod must be 0 or 1");
  if (fmod == 0 && init.has_input(0) &&
      (init.dtype(0) == DataType::kFloat32 || init.dtype(0) == DataType::kFloat64 ||
       init.dtype(0) == DataType::kFloat16)) {
    return init.Error(StatusCode::kInvalidArgument, "fmod must be 1 for floating-point inputs");
  }
  return BinaryFactory(fmod ? BinaryOp::kFMod : BinaryOp::kMod)(init);
}

// Float-only unary ops, applied a row at a time so that each op's loop is compiled with the op
// inlined (and vectorized where it is plain arithmetic); `fn` may read attributes captured by the
// factory.
using UnaryFn = std::function<void(const float* x, float* y, int64_t n)>;

template <class F>
UnaryFn Rows(F f) {
  return [f](const float* x, float* y, int64_t n) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
  };
}
using UnaryMaker = std::function<StatusOr<UnaryFn>(const KernelInit&)>;

KernelFactory UnaryFactory(UnaryMaker make) {
  return [make](const KernelInit& init) -> StatusOr<BoundKernel> {
    MF_RETURN_IF_ERROR(RequireFloat(init, 0));
    auto fn = make(init);
    if (!fn.ok()) return fn.status().WithContext(Graph::Describe(init.node));
    return Bind(
        [f = std::move(fn).value()](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
          const Tensor& x = *in[0];
          MF_ASSIGN_OR_RETURN(out[0], Tensor::AllocateUninitialized(DataType::kFloat32, x.shape()));
          const float* px = x.data<float>();
          float* po = out[0].data<float>();
          ParallelFor(x.num_elements(), 1 << 13, [&](int64_t b, int64_t e) { f(px + b, po + b, e - b); });
          return Status::Ok();
        },
        {DataType::kFloat32});
  };
}

template <float (*Fn)(float)>
UnaryMaker Simple() {
  return [](const KernelInit&) -> StatusOr<UnaryFn> { return Rows([](float x) { return Fn(x); }); };
}

// Activations share one implementation with the fused path.
UnaryMaker ActivationMaker(Activation kind) {
  return [kind](const KernelInit& init) -> StatusOr<UnaryFn> {
    ActivationParams p{kind, 0.f, 0.f};
    if (kind == Activation::kLeakyRelu) {
      MF_ASSIGN_OR_RETURN(p.alpha, init.attrs().GetFloat("alpha", 0.01f));
    }
    return Rows([p](float x) { return Activate(p, x); });
  };
}

// Clip: min/max are attributes before opset 11 and optional scalar inputs from 11 on.
StatusOr<BoundKernel> ClipFactory(const KernelInit& init) {
  MF_RETURN_IF_ERROR(RequireFloat(init, 0));
  float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
  if (init.opset < 11) {
    MF_ASSIGN_OR_RETURN(lo, init.attrs().GetFloat("min", lo));
    MF_ASSIGN_OR_RETURN(hi, init.attrs().GetFloat("max", hi));
  }
  for (size_t i = 1; i < init.num_inputs(); ++i) {
    if (init.has_input(i) && init.dtype(i) != DataType::kFloat32) {
      return init.Error(StatusCode::kUnimplemented, "min/max must be float32");
    }
  }
  return Bind(
      [lo, hi](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        float mn = lo, mx = hi;
        for (size_t i = 1; i < in.size() && i < 3; ++i) {
          if (!in[i]) continue;
          if (in[i]->num_elements() != 1) return InvalidArgument("Clip min/max must be scalars");
          (i == 1 ? mn : mx) = in[i]->data<float>()[0];
        }
        const Tensor& x = *in[0];
        MF_ASSIGN_OR_RETURN(out[0], Tensor::AllocateUninitialized(DataType::kFloat32, x.shape()));
        const float* px = x.data<float>();
        float* po = out[0].data<float>();
        ParallelFor(x.num_elements(), 1 << 14, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) po[i] = std::min(std::max(px[i], mn), mx);
        });
        return Status::Ok();
      },
      {DataType::kFloat32});
}

StatusOr<BoundKernel> WhereFactory(const KernelInit& init) {
  if (init.num_inputs() != 3 || !init.has_input(0) || !init.has_input(1) || !init.has_input(2)) {
    return init.Error(StatusCode::kInvalidArgument, "needs three inputs");
  }
  if (init.dtype(0) != DataType::kBool) return init.Error(StatusCode::kInvalidArgument, "condition must be bool");
  DataType t = init.dtype(1);
  if (t != init.dtype(2)) return init.Error(StatusCode::kInvalidArgument, "X and Y types differ");
  if (t == DataType::kString) return init.Error(StatusCode::kUnimplemented, "string Where is not supported");
  return Bind(
      [t](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        MF_ASSIGN_OR_RETURN(Shape s01, BroadcastShapes(in[0]->shape(), in[1]->shape()));
        MF_ASSIGN_OR_RETURN(Shape shape, BroadcastShapes(s01, in[2]->shape()));
        MF_ASSIGN_OR_RETURN(out[0], Tensor::AllocateUninitialized(t, shape));
        std::array<std::vector<int64_t>, 3> strides{BroadcastStrides(in[0]->shape(), shape),
                                                    BroadcastStrides(in[1]->shape(), shape),
                                                    BroadcastStrides(in[2]->shape(), shape)};
        std::array<int64_t, 3> inner{};
        for (size_t k = 0; k < 3; ++k) inner[k] = shape.empty() ? 0 : strides[k].back();
        return DispatchBySize(t, [&](auto tag) -> Status {
          using T = decltype(tag);
          const bool* c = in[0]->data<bool>();
          const T* x = in[1]->data<T>();
          const T* y = in[2]->data<T>();
          T* o = out[0].data<T>();
          ForEachBroadcastRow<3>(shape, strides, [&](int64_t off, const std::array<int64_t, 3>& io, int64_t n) {
            for (int64_t i = 0; i < n; ++i) {
              o[off + i] = c[io[0] + i * inner[0]] ? x[io[1] + i * inner[1]] : y[io[2] + i * inner[2]];
            }
          });
          return Status::Ok();
        });
      },
      {t});
}

// Max, Min, Sum, Mean over any number of inputs with multidirectional broadcasting: a left fold
// of the binary kernels (Mean divides the sum at the end).
KernelFactory VariadicFactory(BinaryOp op, bool mean) {
  return [op, mean](const KernelInit& init) -> StatusOr<BoundKernel> {
    MF_RETURN_IF_ERROR(ops::RequireInputsOfOneType(init));
    MF_RETURN_IF_ERROR(
        ops::RequireDataInput(init, [mean](DataType t) { return IsNumeric(t) && (!mean || IsFloat(t)); }));
    DataType t = init.dtype(0);
    return Bind(
        [op, mean, t](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
          return DispatchNumeric(t, [&](auto tag) -> Status {
            using T = decltype(tag);
            Tensor acc = in[0]->Clone();
            for (size_t i = 1; i < in.size(); ++i) {
              Tensor next;
              MF_RETURN_IF_ERROR(RunArithmetic<T>(op, acc, *in[i], next));
              acc = std::move(next);
            }
            if constexpr (std::is_floating_point_v<T>) {
              if (mean) {
                T* p = acc.data<T>();
                for (int64_t i = 0; i < acc.num_elements(); ++i) p[i] /= static_cast<T>(in.size());
              }
            }
            out[0] = std::move(acc);
            return Status::Ok();
          });
        },
        {t});
  };
}

// Neg and Abs also apply to signed integers (shape arithmetic in exported graphs uses them).
KernelFactory SignedUnaryFactory(bool negate) {
  return [negate](const KernelInit& init) -> StatusOr<BoundKernel> {
    MF_RETURN_IF_ERROR(ops::RequireDataInput(init, IsNumeric));
    DataType t = init.dtype(0);
    return Bind(
        [negate, t](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
          MF_ASSIGN_OR_RETURN(out[0], Tensor::AllocateUninitialized(t, in[0]->shape()));
          return DispatchNumeric(t, [&](auto tag) -> Status {
            using T = decltype(tag);
            const T* px = in[0]->data<T>();
            T* po = out[0].data<T>();
            for (int64_t i = 0; i < in[0]->num_elements(); ++i) {
              T v = px[i];
              if constexpr (std::is_signed_v<T>) {
                // Wraps like numpy for the most negative integer instead of overflowing (UB).
                if constexpr (std::is_integral_v<T>) {
                  using U = std::make_unsigned_t<T>;
                  T neg = static_cast<T>(U(0) - static_cast<U>(v));
                  po[i] = negate ? neg : (v < 0 ? neg : v);
                } else {
                  po[i] = negate ? -v : (v < 0 ? -v : v);
                }
              } else {
                po[i] = negate ? static_cast<T>(0 - v) : v;
              }
            }
            return Status::Ok();
          });
        },
        {t});
  };
}

// And, Or, Xor on bool tensors with broadcasting; Not.
KernelFactory LogicalFactory(int op) {
  return [op](const KernelInit& init) -> StatusOr<BoundKernel> {
    size_t arity = op == 3 ? 1 : 2;
    if (init.num_inputs() != arity) return init.Error(StatusCode::kInvalidArgument, "wrong number of inputs");
    for (size_t i = 0; i < arity; ++i) {
      if (!init.has_input(i) || init.dtype(i) != DataType::kBool)
        return init.Error(StatusCode::kInvalidArgument, "inputs must be bool");
    }
    return Bind(
        [op](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
          if (op == 3) {
            MF_ASSIGN_OR_RETURN(out[0], Tensor::AllocateUninitialized(DataType::kBool, in[0]->shape()));
            for (int64_t i = 0; i < in[0]->num_elements(); ++i) out[0].data<bool>()[i] = !in[0]->data<bool>()[i];
            return Status::Ok();
          }
          return BinaryBroadcast<bool, bool>(*in[0], *in[1], DataType::kBool, out[0], [op](bool a, bool b) {
            return op == 0 ? (a && b) : op == 1 ? (a || b) : (a != b);
          });
        },
        {DataType::kBool});
  };
}

// PRelu: x < 0 ? slope * x : x, with the slope broadcast to x.
StatusOr<BoundKernel> PReluFactory(const KernelInit& init) {
  MF_RETURN_IF_ERROR(RequireFloat(init, 0));
  MF_RETURN_IF_ERROR(RequireFloat(init, 1));
  return Bind(
      [](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        auto prelu = [](float x, float s) { return x < 0.f ? s * x : x; };
        MF_RETURN_IF_ERROR((BinaryBroadcast<float, float>(*in[0], *in[1], DataType::kFloat32, out[0], prelu)));
        if (out[0].shape() != in[0]->shape()) return InvalidArgument("PRelu slope must broadcast to the input's shape");
        return Status::Ok();
      },
      {DataType::kFloat32});
}

float Relu(float x) { return x > 0.f ? x : 0.f; }
float Sigmoid(float x) { return 1.f / (1.f + std::exp(-x)); }
float Tanh(float x) { return std::tanh(x); }
float Sqrt(float x) { return std::sqrt(x); }
float ExpExact(float x) { return std::exp(x); }  // overflows to inf as ONNX expects
float Log(float x) { return std::log(x); }
float Reciprocal(float x) { return 1.f / x; }
float Floor(float x) { return std::floor(x); }
float Ceil(float x) { return std::ceil(x); }
float Round(float x) { return std::nearbyint(x); }  // half to even, as ONNX specifies
float Cos(float x) { return std::cos(x); }
float Sin(float x) { return std::sin(x); }
float Softplus(float x) { return x > 20.f ? x : std::log1p(std::exp(x)); }
float HardSwish(float x) { return x * std::max(0.f, std::min(1.f, x / 6.f + 0.5f)); }  // MobileNetV3's

}  // namespace

void RegisterElementwiseKernels(KernelRegistry* r) {
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
  for (const auto& [name, op] : binary) r->Register({name, 7, BinaryFactory(op), "numeric"});
  r->Register({"Mod", 10, ModFactory, "numeric"});
  r->Register({"Relu", 6, UnaryFactory(Simple<Relu>()), "float"});
  r->Register({"LeakyRelu", 6, UnaryFactory(ActivationMaker(Activation::kLeakyRelu)), "float"});
  r->Register({"Sigmoid", 6, UnaryFactory(Simple<Sigmoid>()), "float"});
  r->Register({"Tanh", 6, UnaryFactory(Simple<Tanh>()), "float"});
  r->Register({"Erf", 9, UnaryFactory(Simple<Erf>()), "float"});
  r->Register({"Sqrt", 6, UnaryFactory(Simple<Sqrt>()), "float"});
  r->Register({"Exp", 6, UnaryFactory(Simple<ExpExact>()), "float"});
  r->Register({"Log", 6, UnaryFactory(Simple<Log>()), "float"});
  r->Register({"Neg", 6, SignedUnaryFactory(true), "numeric"});
  r->Register({"Abs", 6, SignedUnaryFactory(false), "numeric"});
  // Opset 8 introduced multidirectional broadcasting for the variadic ops.
  r->Register({"Max", 8, VariadicFactory(BinaryOp::kMax, false), "numeric"});
  r->Register({"Min", 8, VariadicFactory(BinaryOp::kMin, false), "numeric"});
  r->Register({"Sum", 8, VariadicFactory(BinaryOp::kAdd, false), "numeric"});
  r->Register({"Mean", 8, VariadicFactory(BinaryOp::kAdd, true), "float"});
  r->Register({"Reciprocal", 6, UnaryFactory(Simple<Reciprocal>()), "float"});
  r->Register({"Floor", 6, UnaryFactory(Simple<Floor>()), "float"});
  r->Register({"Ceil", 6, UnaryFactory(Simple<Ceil>()), "float"});
  r->Register({"Elu", 6, UnaryFactory([](const KernelInit& init) -> StatusOr<UnaryFn> {
                 MF_ASSIGN_OR_RETURN(float alpha, init.attrs().GetFloat("alpha", 1.f));
                 return Rows([alpha](float x) { return x >= 0.f ? x : alpha * (std::exp(x) - 1.f); });
               }),
               "float"});
  r->Register({"Clip", 6, ClipFactory, "float"});
  r->Register({"And", 7, LogicalFactory(0), "bool"});
  r->Register({"Or", 7, LogicalFactory(1), "bool"});
  r->Register({"Xor", 7, LogicalFactory(2), "bool"});
  r->Register({"Not", 1, LogicalFactory(3), "bool"});
  r->Register({"PRelu", 7, PReluFactory, "float"});
  r->Register({"Round", 11, UnaryFactory(Simple<Round>()), "float"});
  r->Register({"Cos", 7, UnaryFactory(Simple<Cos>()), "float"});
  r->Register({"Sin", 7, UnaryFactory(Simple<Sin>()), "float"});
  r->Register({"Softplus", 1, UnaryFactory(Simple<Softplus>()), "float"});
  r->Register({"Selu", 6, UnaryFactory([](const KernelInit& init) -> StatusOr<UnaryFn> {
                 MF_ASSIGN_OR_RETURN(float alpha, init.attrs().GetFloat("alpha", 1.67326319217681884765625f));
                 MF_ASSIGN_OR_RETURN(float gamma, init.attrs().GetFloat("gamma", 1.05070102214813232421875f));
                 return Rows(
                     [alpha, gamma](float x) { return x > 0.f ? gamma * x : gamma * (alpha * std::exp(x) - alpha); });
               }),
               "float"});
  r->Register({"HardSigmoid", 6, UnaryFactory([](const KernelInit& init) -> StatusOr<UnaryFn> {
                 MF_ASSIGN_OR_RETURN(float alpha, init.attrs().GetFloat("alpha", 0.2f));
                 MF_ASSIGN_OR_RETURN(float beta, init.attrs().GetFloat("beta", 0.5f));
                 return Rows([alpha, beta](float x) { return std::max(0.f, std::min(1.f, alpha * x + beta)); });
               }),
               "float"});
  // ONNX's Gelu is opset 20, newer than the loader reads; FuseGelu makes Gelu nodes out of older
  // exports' Erf formula (the exact form), so this kernel answers at every opset.
  r->Register({"Gelu", 1, UnaryFactory([](const KernelInit& init) -> StatusOr<UnaryFn> {
                 MF_ASSIGN_OR_RETURN(std::string approximate, init.attrs().GetString("approximate", "none"));
                 if (approximate != "none") return InvalidArgument("only the exact Gelu (approximate=\"none\") runs");
                 return UnaryFn(GeluRows);
               }),
               "float (made by the GELU fusion)"});
  r->Register({"HardSwish", 14, UnaryFactory(Simple<HardSwish>()), "float"});
  r->Register({"Where", 9, WhereFactory, "any but string"});
}

}  // namespace mf::runtime::cpu
