// Gemm and MatMul on cuBLASLt.
//
// Our tensors are row-major; cuBLASLt is column-major. A row-major [M, N] = [M, K] x [K, N] is the
// column-major D[N, M] = B'[N, K] x A'[K, M], where A' and B' are the same buffers read
// column-major, so each call swaps the operands instead of moving data. Gemm's C becomes the
// BIAS epilogue (with ReLU fused: RELU_BIAS) when it is an [N] / [1, N] vector added with
// beta == 1; otherwise the beta * C term, broadcast into the output first when C is not
// [M, N]. Other fused activations run after the product. A constant 2-D right operand is
// uploaded once, transposed, so that shared-weight products run in cuBLASLt's "TN" form. The heuristic's algorithm is
// cached per problem (shapes, transposes, batching, epilogue, pointer alignments); descriptors are built per call
// (cheap host objects) because the bias pointer differs between runs.
#include <map>
#include <mutex>

#include "runtime/cuda/dnn_util.h"
#include "runtime/ops/indexing.h"
#include "runtime/ops/matmul_shapes.h"

namespace mf::runtime::cuda {
namespace {

template <typename T, cublasStatus_t (*Destroy)(T)>
class LtObject {
 public:
  LtObject() = default;
  ~LtObject() {
    if (obj_) Destroy(obj_);
  }
  LtObject(const LtObject&) = delete;
  LtObject& operator=(const LtObject&) = delete;
  T get() const { return obj_; }
  T* out() { return &obj_; }

 private:
  T obj_ = nullptr;
};
using MatmulDesc = LtObject<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy>;
using Layout = LtObject<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>;
using Preference = LtObject<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy>;

// One product in row-major terms: D[b] = alpha * op(A[b]) x op(B[b]) + beta * C[b] (+ epilogue)
// with A stored [M, K] (or [K, M] when ta), B stored [K, N] (or [N, K] when tb), C and D [M, N].
struct Product {
  int64_t m = 0, n = 0, k = 0;
  bool ta = false, tb = false;
  int64_t batch = 1, stride_a = 0, stride_b = 0, stride_d = 0;
  const void* a = nullptr;
  const void* b = nullptr;
  const void* c = nullptr;  // nullptr: no C term (beta ignored)
  void* d = nullptr;
  float alpha = 1.f, beta = 0.f;
  const void* bias = nullptr;  // [N], with the BIAS epilogue
  bool relu = false;
};

struct Algo {
  cublasLtMatmulAlgo_t algo;
  size_t workspace = 0;
};

class MatmulRunner {
 public:
  MatmulRunner(DataType dtype, Precision precision) : dtype_(dtype), precision_(precision) {}

  Status Run(const Product& p) const {
    if (p.m == 0 || p.n == 0 || p.batch == 0) return Status::Ok();
    cudaDataType_t type = dtype_ == DataType::kFloat16 ? CUDA_R_16F : CUDA_R_32F;
    cublasComputeType_t compute = precision_ == Precision::kTf32 && dtype_ == DataType::kFloat32
                                      ? CUBLAS_COMPUTE_32F_FAST_TF32
                                      : CUBLAS_COMPUTE_32F;
    MatmulDesc desc;
    MF_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescCreate(desc.out(), compute, CUDA_R_32F));
    // Operand swap (see the file comment): cuBLASLt's A is our B and its B is our A.
    cublasOperation_t op_a = p.tb ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = p.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    MF_CUBLAS_RETURN_IF_ERROR(
        cublasLtMatmulDescSetAttribute(desc.get(), CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
    MF_CUBLAS_RETURN_IF_ERROR(
        cublasLtMatmulDescSetAttribute(desc.get(), CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
    cublasLtEpilogue_t epilogue = p.bias ? (p.relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS)
                                         : (p.relu ? CUBLASLT_EPILOGUE_RELU : CUBLASLT_EPILOGUE_DEFAULT);
    MF_CUBLAS_RETURN_IF_ERROR(
        cublasLtMatmulDescSetAttribute(desc.get(), CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
    if (p.bias) {
      MF_CUBLAS_RETURN_IF_ERROR(
          cublasLtMatmulDescSetAttribute(desc.get(), CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p.bias, sizeof(p.bias)));
    }
    // Column-major views: our B is [n x k] (or [k x n] read transposed), our A [k x m], D [n x m].
    Layout la, lb, lc, ld;
    MF_RETURN_IF_ERROR(MakeLayout(&la, type, p.tb ? p.k : p.n, p.tb ? p.n : p.k, p.batch, p.stride_b));
    MF_RETURN_IF_ERROR(MakeLayout(&lb, type, p.ta ? p.m : p.k, p.ta ? p.k : p.m, p.batch, p.stride_a));
    MF_RETURN_IF_ERROR(MakeLayout(&lc, type, p.n, p.m, p.batch, p.stride_d));
    MF_RETURN_IF_ERROR(MakeLayout(&ld, type, p.n, p.m, p.batch, p.stride_d));
    const void* c = p.c ? p.c : p.d;
    float beta = p.c ? p.beta : 0.f;
    const RunContext& ctx = Current();
    MF_ASSIGN_OR_RETURN(Algo algo, Choose(p, epilogue, desc, la, lb, lc, ld, c));
    MF_ASSIGN_OR_RETURN(Tensor workspace, AllocateWorkspace(algo.workspace));
    MF_CUBLAS_RETURN_IF_ERROR(cublasLtMatmul(ctx.cublaslt, desc.get(), &p.alpha, p.b, la.get(), p.a, lb.get(), &beta, c,
                                             lc.get(), p.d, ld.get(), &algo.algo, workspace.raw_data(), algo.workspace,
                                             ctx.stream));
    return Status::Ok();
  }

 private:
  static Status MakeLayout(Layout* layout, cudaDataType_t type, int64_t rows, int64_t cols, int64_t batch,
                           int64_t stride) {
    MF_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(layout->out(), type, static_cast<uint64_t>(rows),
                                                         static_cast<uint64_t>(cols), rows));
    if (batch > 1) {
      if (batch > INT32_MAX) return InvalidArgument("MatMul batch of " + std::to_string(batch) + " is too large");
      int32_t count = static_cast<int32_t>(batch);
      MF_CUBLAS_RETURN_IF_ERROR(
          cublasLtMatrixLayoutSetAttribute(layout->get(), CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
      MF_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutSetAttribute(
          layout->get(), CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
    }
    return Status::Ok();
  }

  StatusOr<Algo> Choose(const Product& p, cublasLtEpilogue_t epilogue, const MatmulDesc& desc, const Layout& la,
                        const Layout& lb, const Layout& lc, const Layout& ld, const void* c) const {
    uint32_t align_a = PointerAlignment(p.b), align_b = PointerAlignment(p.a), align_c = PointerAlignment(c),
             align_d = PointerAlignment(p.d);
    std::vector<int64_t> key{p.m,        p.n,
                             p.k,        p.ta,
                             p.tb,       p.batch,
                             p.stride_a, p.stride_b,
                             p.stride_d, static_cast<int64_t>(epilogue),
                             c == p.d,   align_a,
                             align_b,    align_c,
                             align_d,    p.bias ? PointerAlignment(p.bias) : 0};
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = cache_.find(key);
      if (it != cache_.end()) return it->second;
    }
    Preference pref;
    MF_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(pref.out()));
    uint64_t workspace = Current().workspace_bytes;
    MF_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(pref.get(), CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                                   &workspace, sizeof(workspace)));
    // Algorithms are picked for these alignments; batch offsets inside a buffer can lower them.
    MF_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(
        pref.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof(align_a)));
    MF_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(
        pref.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof(align_b)));
    MF_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(
        pref.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c, sizeof(align_c)));
    MF_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(
        pref.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d, sizeof(align_d)));
    cublasLtMatmulHeuristicResult_t result{};
    int returned = 0;
    MF_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulAlgoGetHeuristic(Current().cublaslt, desc.get(), la.get(), lb.get(),
                                                             lc.get(), ld.get(), pref.get(), 1, &result, &returned));
    if (returned == 0 || result.state != CUBLAS_STATUS_SUCCESS) {
      return Unimplemented("cuBLASLt has no algorithm for a " + std::to_string(p.m) + "x" + std::to_string(p.n) + "x" +
                           std::to_string(p.k) + " product (batch " + std::to_string(p.batch) + ")");
    }
    Algo algo{result.algo, result.workspaceSize};
    std::lock_guard<std::mutex> lock(mu_);
    if (cache_.size() >= kMaxCached) cache_.clear();  // bounded against ever-new shapes
    cache_[key] = algo;
    return algo;
  }

  static constexpr size_t kMaxCached = 64;
  DataType dtype_;
  Precision precision_;
  mutable std::mutex mu_;
  mutable std::map<std::vector<int64_t>, Algo> cache_;
};

Status RequireSameDeviceFloat(const KernelInit& init, size_t i, DataType dtype) {
  if (!init.has_input(i)) return init.Error(StatusCode::kInvalidArgument, "input " + std::to_string(i) + " is missing");
  if (init.dtype(i) != dtype || !IsDeviceFloat(dtype)) {
    return init.Error(StatusCode::kUnimplemented, "element type " + std::string(DataTypeName(init.dtype(i))) +
                                                      " of input " + std::to_string(i) + " on the GPU");
  }
  return Status::Ok();
}

// A constant right operand B [K, N] uploaded transposed ([N, K], K contiguous), in the device
// float type: with it the product runs in cuBLASLt's "TN" form, the one its tensor-core kernels
// are tuned for. Empty when B is not a constant float32 matrix (the run then reads B as is).
StatusOr<Tensor> PackTransposedWeights(const Tensor* b, DataType dtype) {
  if (!b || b->rank() != 2 || b->dtype() != DataType::kFloat32 || b->num_elements() == 0) return Tensor();
  int64_t k = b->dim(0), n = b->dim(1);
  MF_ASSIGN_OR_RETURN(Tensor t, Tensor::AllocateUninitialized(DataType::kFloat32, {n, k}));
  const float* src = b->data<float>();
  float* dst = t.data<float>();
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < n; ++j) dst[j * k + i] = src[i * n + j];
  return UploadConstant(t, dtype);
}

class GemmKernel final : public Kernel {
 public:
  GemmKernel(DataType dtype, Precision precision, float alpha, float beta, bool ta, bool tb, Activation act,
             Tensor packed_b, Shape packed_from)
      : dtype_(dtype),
        alpha_(alpha),
        beta_(beta),
        ta_(ta),
        tb_(tb),
        act_(act),
        runner_(dtype, precision),
        packed_b_(std::move(packed_b)),
        packed_from_(std::move(packed_from)) {}

  // The constant B is read from its pre-transposed copy (its shape is all Run takes from B).
  bool OwnsCopyOfInput(size_t index) const override { return index == 1 && packed_b_.num_elements() > 0; }

  Status Run(const std::vector<const Tensor*>& in, std::vector<Tensor>& out) const override {
    const Tensor& A = *in[0];
    const Tensor& B = *in[1];
    MF_ASSIGN_OR_RETURN(ops::GemmShape g, ops::PlanGemm(A.shape(), B.shape(), ta_, tb_));
    int64_t m = g.m, k = g.k, n = g.n;
    const Tensor* C = in.size() > 2 ? in[2] : nullptr;
    Shape out_shape{m, n};
    if (C && beta_ != 0.f) {
      MF_RETURN_IF_ERROR(ops::CheckGemmC(C->shape(), m, n));
    }
    MF_ASSIGN_OR_RETURN(out[0], AllocateDevice(dtype_, out_shape));
    Tensor& D = out[0];
    if (D.num_elements() == 0) return Status::Ok();
    bool use_c = C && beta_ != 0.f;
    if (k == 0) {  // no products: D = beta * C (or zeros), then the activation
      MF_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(D.raw_data(), 0, D.byte_size(), Current().stream));
      if (use_c) MF_RETURN_IF_ERROR(BroadcastAxpy(dtype_, *C, beta_, false, out_shape, D.raw_data()));
      return ApplyActivation(act_, dtype_, D.raw_data(), D.num_elements());
    }
    Product p;
    p.m = m;
    p.n = n;
    p.k = k;
    p.ta = ta_;
    p.tb = tb_;
    p.a = A.raw_data();
    p.b = B.raw_data();
    if (packed_b_.num_elements() && B.shape() == packed_from_) {
      p.b = packed_b_.raw_data();  // the constant B, pre-transposed at bind time
      p.tb = true;
    }
    p.d = D.raw_data();
    p.alpha = alpha_;
    if (use_c) {
      bool row_vector = (C->rank() == 1 && C->dim(0) == n) || (C->rank() == 2 && C->dim(0) == 1 && C->dim(1) == n);
      if (row_vector && beta_ == 1.f) {
        p.bias = C->raw_data();  // the BIAS epilogue adds C[j] to every row
      } else if (C->shape() == out_shape) {
        p.c = C->raw_data();
        p.beta = beta_;
      } else {
        MF_RETURN_IF_ERROR(BroadcastAxpy(dtype_, *C, beta_, false, out_shape, D.raw_data()));
        p.c = D.raw_data();  // in place: D = alpha * AB + 1 * D
        p.beta = 1.f;
      }
    }
    p.relu = IsRelu(act_);
    MF_RETURN_IF_ERROR(runner_.Run(p));
    if (!p.relu) MF_RETURN_IF_ERROR(ApplyActivation(act_, dtype_, D.raw_data(), D.num_elements()));
    return Status::Ok();
  }

 private:
  DataType dtype_;
  float alpha_, beta_;
  bool ta_, tb_;
  Activation act_;
  MatmulRunner runner_;
  Tensor packed_b_;    // constant B [K, N] as [N, K] (transB = 0 only), else empty
  Shape packed_from_;  // the shape B had
};

class MatMulKernel final : public Kernel {
 public:
  MatMulKernel(DataType dtype, Precision precision, Activation act, Tensor packed_b, Shape packed_from)
      : dtype_(dtype),
        act_(act),
        runner_(dtype, precision),
        packed_b_(std::move(packed_b)),
        packed_from_(std::move(packed_from)) {}

  // The constant B is read from its pre-transposed copy (its shape is all Run takes from B).
  bool OwnsCopyOfInput(size_t index) const override { return index == 1 && packed_b_.num_elements() > 0; }

  Status Run(const std::vector<const Tensor*>& in, std::vector<Tensor>& out) const override {
    const Tensor& A = *in[0];
    const Tensor& B = *in[1];
    MF_ASSIGN_OR_RETURN(ops::MatMulShape shape, ops::PlanMatMul(A.shape(), B.shape()));
    int64_t m = shape.m, k = shape.k, n = shape.n;
    const Shape &batch = shape.batch, &batch_a = shape.batch_a, &batch_b = shape.batch_b, &out_shape = shape.out;
    MF_ASSIGN_OR_RETURN(out[0], AllocateDevice(dtype_, out_shape));
    Tensor& D = out[0];
    if (D.num_elements() == 0) return Status::Ok();
    if (k == 0) {
      MF_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(D.raw_data(), 0, D.byte_size(), Current().stream));
      return ApplyActivation(act_, dtype_, D.raw_data(), D.num_elements());
    }
    int64_t batches = NumElements(batch), na = NumElements(batch_a), nb = NumElements(batch_b);
    Product p;
    p.m = m;
    p.n = n;
    p.k = k;
    p.a = A.raw_data();
    p.b = B.raw_data();
    p.d = D.raw_data();
    p.relu = IsRelu(act_);
    Status s;
    if (nb == 1) {
      // Shared right operand (weights): one GEMM over all batch rows of A.
      p.m = batches * m;
      if (packed_b_.num_elements() && B.shape() == packed_from_) {
        p.b = packed_b_.raw_data();
        p.tb = true;
      }
      s = runner_.Run(p);
    } else if ((na == batches || na == 1) && nb == batches) {
      p.batch = batches;
      p.stride_a = na == 1 ? 0 : m * k;  // a broadcast left operand is re-read by every batch
      p.stride_b = k * n;
      p.stride_d = m * n;
      s = runner_.Run(p);
      if (s.code() == StatusCode::kUnimplemented && na == 1) s = Loop(p, batch, batch_a, batch_b);
    } else {
      s = Loop(p, batch, batch_a, batch_b);
    }
    MF_RETURN_IF_ERROR(s);
    if (!p.relu) MF_RETURN_IF_ERROR(ApplyActivation(act_, dtype_, D.raw_data(), D.num_elements()));
    return Status::Ok();
  }

 private:
  // Partial broadcasting (e.g. [2, 1] x [1, 3] batches): one product per output batch.
  Status Loop(Product p, const Shape& batch, const Shape& batch_a, const Shape& batch_b) const {
    size_t rank = batch.size();
    // Strides (in matrices) of each operand's batch dims seen from `batch`.
    std::vector<int64_t> st_a = ops::BroadcastStrides(batch_a, batch), st_b = ops::BroadcastStrides(batch_b, batch);
    size_t esize = ElementSize(dtype_);
    const char* a0 = static_cast<const char*>(p.a);
    const char* b0 = static_cast<const char*>(p.b);
    char* d0 = static_cast<char*>(p.d);
    p.batch = 1;
    p.stride_a = p.stride_b = p.stride_d = 0;
    int64_t batches = NumElements(batch);
    for (int64_t bi = 0; bi < batches; ++bi) {
      int64_t rem = bi, oa = 0, ob = 0;
      for (size_t d = rank; d-- > 0;) {
        int64_t idx = rem % batch[d];
        rem /= batch[d];
        oa += idx * st_a[d];
        ob += idx * st_b[d];
      }
      p.a = a0 + static_cast<size_t>(oa * p.m * p.k) * esize;
      p.b = b0 + static_cast<size_t>(ob * p.k * p.n) * esize;
      p.d = d0 + static_cast<size_t>(bi * p.m * p.n) * esize;
      MF_RETURN_IF_ERROR(runner_.Run(p));
    }
    return Status::Ok();
  }

  DataType dtype_;
  Activation act_;
  MatmulRunner runner_;
  Tensor packed_b_;  // a constant 2-D B [K, N] as [N, K], else empty
  Shape packed_from_;
};

StatusOr<BoundKernel> GemmFactory(const KernelInit& init) {
  if (!init.has_input(0)) return init.Error(StatusCode::kInvalidArgument, "input 0 is missing");
  DataType dtype = init.dtype(0);
  MF_RETURN_IF_ERROR(RequireSameDeviceFloat(init, 0, dtype));
  MF_RETURN_IF_ERROR(RequireSameDeviceFloat(init, 1, dtype));
  if (init.has_input(2)) MF_RETURN_IF_ERROR(RequireSameDeviceFloat(init, 2, dtype));
  const Attributes& a = init.attrs();
  MF_ASSIGN_OR_RETURN(float alpha, a.GetFloat("alpha", 1.f));
  MF_ASSIGN_OR_RETURN(float beta, a.GetFloat("beta", 1.f));
  MF_ASSIGN_OR_RETURN(int64_t trans_a, a.GetInt("transA", 0));
  MF_ASSIGN_OR_RETURN(int64_t trans_b, a.GetInt("transB", 0));
  MF_ASSIGN_OR_RETURN(Activation act, ActivationFromNode(init.node));
  const Tensor* b = init.constant_inputs.size() > 1 ? init.constant_inputs[1] : nullptr;
  Tensor packed;
  if (!trans_b) {
    MF_ASSIGN_OR_RETURN(packed, PackTransposedWeights(b, dtype));
  }
  Shape from = packed.num_elements() ? b->shape() : Shape{};
  return BoundKernel{std::make_unique<GemmKernel>(dtype, init.precision, alpha, beta, trans_a != 0, trans_b != 0, act,
                                                  std::move(packed), std::move(from)),
                     {dtype}};
}

StatusOr<BoundKernel> MatMulFactory(const KernelInit& init) {
  if (!init.has_input(0)) return init.Error(StatusCode::kInvalidArgument, "input 0 is missing");
  DataType dtype = init.dtype(0);
  MF_RETURN_IF_ERROR(RequireSameDeviceFloat(init, 0, dtype));
  MF_RETURN_IF_ERROR(RequireSameDeviceFloat(init, 1, dtype));
  MF_ASSIGN_OR_RETURN(Activation act, ActivationFromNode(init.node));
  const Tensor* b = init.constant_inputs.size() > 1 ? init.constant_inputs[1] : nullptr;
  MF_ASSIGN_OR_RETURN(Tensor packed, PackTransposedWeights(b, dtype));
  Shape from = packed.num_elements() ? b->shape() : Shape{};
  return BoundKernel{std::make_unique<MatMulKernel>(dtype, init.precision, act, std::move(packed), std::move(from)),
                     {dtype}};
}

}  // namespace

void RegisterMatMulKernels(KernelRegistry* registry) {
  registry->Register({"Gemm", 7, GemmFactory, "float, float16"});
  registry->Register({"MatMul", 1, MatMulFactory, "float, float16"});
}

}  // namespace mf::runtime::cuda
