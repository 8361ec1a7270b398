// Gemm and MatMul: by constant weights on a oneDNN matmul with the weights packed once
// (packed_matmul.h), else on oneDNN's row-major sgemm (multi-threaded, AVX-512 where present).
#include <cstring>
#include <mutex>

#include "runtime/cpu/activation.h"
#include "runtime/cpu/cpu_common.h"
#include "runtime/cpu/packed_matmul.h"
#include "runtime/ops/indexing.h"
#include "runtime/ops/matmul_shapes.h"

namespace mf::runtime::cpu {
namespace {

StatusOr<ActivationParams> FusedActivation(const KernelInit& init) {
  MF_ASSIGN_OR_RETURN(Activation kind, ActivationFromName(init.node.fused_activation));
  return ActivationParams{kind, init.node.fused_alpha, init.node.fused_beta};
}

// The right operand is a 2-D constant (weights): the packed kernel can reorder it once.
bool HasConstantWeights(const KernelInit& init) {
  const Tensor* w = init.constant_inputs.size() > 1 ? init.constant_inputs[1] : nullptr;
  return w && w->rank() == 2 && w->dtype() == DataType::kFloat32;
}

StatusOr<BoundKernel> GemmFactory(const KernelInit& init) {
  MF_RETURN_IF_ERROR(RequireFloat(init, 0));
  MF_RETURN_IF_ERROR(RequireFloat(init, 1));
  if (init.has_input(2)) MF_RETURN_IF_ERROR(RequireFloat(init, 2));
  const Attributes& a = init.attrs();
  MF_ASSIGN_OR_RETURN(float alpha, a.GetFloat("alpha", 1.f));
  MF_ASSIGN_OR_RETURN(float beta, a.GetFloat("beta", 1.f));
  MF_ASSIGN_OR_RETURN(int64_t trans_a, a.GetInt("transA", 0));
  MF_ASSIGN_OR_RETURN(int64_t trans_b, a.GetInt("transB", 0));
  MF_ASSIGN_OR_RETURN(ActivationParams act, FusedActivation(init));
  FunctionKernel::Fn sgemm = [=](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
    const Tensor& A = *in[0];
    const Tensor& B = *in[1];
    MF_ASSIGN_OR_RETURN(ops::GemmShape g, ops::PlanGemm(A.shape(), B.shape(), trans_a != 0, trans_b != 0));
    int64_t m = g.m, k = g.k, n = g.n;
    const Tensor* C = in.size() > 2 ? in[2] : nullptr;
    MF_ASSIGN_OR_RETURN(out[0], Tensor::AllocateUninitialized(DataType::kFloat32, {m, n}));
    float* y = out[0].data<float>();
    float gemm_beta = 0.f;
    if (C && beta != 0.f) {
      MF_RETURN_IF_ERROR(ops::CheckGemmC(C->shape(), m, n));
      std::vector<int64_t> st = BroadcastStrides(C->shape(), {m, n});
      const float* c = C->data<float>();
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) y[i * n + j] = beta * c[i * st[0] + j * st[1]];
      }
      gemm_beta = 1.f;
    }
    MF_RETURN_IF_ERROR(
        Sgemm(trans_a, trans_b, m, n, k, alpha, A.data<float>(), A.dim(1), B.data<float>(), B.dim(1), gemm_beta, y, n));
    ApplyActivation(act, y, m * n);
    return Status::Ok();
  };
  const bool c_is_bias = !init.has_input(2) || beta == 1.f;
  if (HasConstantWeights(init) && alpha == 1.f && trans_a == 0 && c_is_bias) {
    return BoundKernel{
        MakePackedMatMulKernel(
            {.gemm = true, .transposed_weights = trans_b != 0, .act = act, .fallback = std::move(sgemm)}),
        {DataType::kFloat32}};
  }
  return Bind(std::move(sgemm), {DataType::kFloat32});
}

// One operand or the output of a batched product as it lies in memory: logical dims, and the
// element stride of each in the buffer.
struct Strided {
  Shape dims;
  std::vector<int64_t> strides;
};

// A tensor of `dims` read as Transpose(perm) of it (empty perm: as it is).
StatusOr<Strided> ReadThrough(const Shape& dims, const std::vector<int64_t>& perm, const char* what) {
  std::vector<int64_t> strides = ops::RowMajorStrides(dims);
  if (perm.empty()) return Strided{dims, strides};
  if (perm.size() != dims.size()) {
    return InvalidArgument(std::string("the fused Transpose of MatMul ") + what + " has " +
                           std::to_string(perm.size()) + " axes, the tensor " + ShapeToString(dims));
  }
  Strided v;
  for (int64_t p : perm) {
    v.dims.push_back(dims[static_cast<size_t>(p)]);
    v.strides.push_back(strides[static_cast<size_t>(p)]);
  }
  return v;
}

// How sgemm reads a rows x cols matrix with these strides: one of them must be 1 (sizes of 1
// have any stride).
struct SgemmOperand {
  bool trans;
  int64_t ld;
};
StatusOr<SgemmOperand> AsSgemmOperand(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
  if (cols == 1 || col_stride == 1) return SgemmOperand{false, rows == 1 ? std::max<int64_t>(cols, 1) : row_stride};
  if (rows == 1 || row_stride == 1) return SgemmOperand{true, cols == 1 ? std::max<int64_t>(rows, 1) : col_stride};
  return Internal("a fused MatMul operand has no unit stride");
}

// The product's batch strides of an operand with `batch_dims` (its leading dims, right-aligned
// against the broadcast `batch`): 0 where it broadcasts.
std::vector<int64_t> BatchStrides(const Strided& v, size_t batch_dims, const Shape& batch) {
  std::vector<int64_t> out(batch.size(), 0);
  const size_t offset = batch.size() - batch_dims;
  for (size_t d = 0; d < batch_dims; ++d) {
    if (v.dims[d] != 1) out[offset + d] = v.strides[d];
  }
  return out;
}

// MatMul on sgemm: y = scale * A x B (+ bias) with NumPy batch broadcasting. A and B may be read
// through Transposes and y written through one (Node::MatMulLayout); a third input
// (FuseMatMulBias) is a bias of N values added to every output row.
Status RunMatMul(const Tensor& A, const Tensor& B, const Tensor* bias, const Node::MatMulLayout& layout,
                 const ActivationParams& act, Tensor& out) {
  MF_ASSIGN_OR_RETURN(Strided a, ReadThrough(A.shape(), layout.perm_a, "A"));
  MF_ASSIGN_OR_RETURN(Strided b, ReadThrough(B.shape(), layout.perm_b, "B"));
  MF_ASSIGN_OR_RETURN(ops::MatMulShape shape, ops::PlanMatMul(a.dims, b.dims));
  const int64_t m = shape.m, k = shape.k, n = shape.n;
  const int64_t batches = NumElements(shape.batch);
  // The output as written: Transpose(perm_y) of the product, whose rows stay contiguous.
  Shape y_dims = shape.out;
  if (!layout.perm_y.empty()) {
    if (layout.perm_y.size() != shape.out.size() || layout.perm_y.back() != static_cast<int64_t>(y_dims.size()) - 1) {
      return InvalidArgument("the fused Transpose of the MatMul output does not fit " + ShapeToString(shape.out));
    }
    for (size_t i = 0; i < y_dims.size(); ++i) y_dims[i] = shape.out[static_cast<size_t>(layout.perm_y[i])];
  }
  MF_ASSIGN_OR_RETURN(out, Tensor::AllocateUninitialized(DataType::kFloat32, y_dims));
  float* y = out.data<float>();
  const float* pa = A.data<float>();
  const float* pb = B.data<float>();
  if (bias) {
    if (bias->num_elements() != n || NumElements(shape.batch_b) != 1 || !layout.plain()) {
      return InvalidArgument("a MatMul bias needs " + std::to_string(n) + " values and a shared right operand");
    }
    for (int64_t row = 0; row < batches * m; ++row) std::memcpy(y + row * n, bias->data<float>(), n * sizeof(float));
  }
  const float beta = bias ? 1.f : 0.f;
  if (NumElements(shape.batch_b) == 1 && batches > 0 && layout.perm_a.empty() && layout.perm_y.empty()) {
    // Shared right operand (weights) and rows in order: one big GEMM over all batch rows of A.
    const size_t rb = b.dims.size();
    MF_ASSIGN_OR_RETURN(SgemmOperand ob, AsSgemmOperand(k, n, rb > 1 ? b.strides[rb - 2] : 1, b.strides[rb - 1]));
    MF_RETURN_IF_ERROR(Sgemm(false, ob.trans, batches * m, n, k, layout.scale, pa, k, pb, ob.ld, beta, y, n));
    ApplyActivation(act, y, out.num_elements());
    return Status::Ok();
  }
  // Each product's matrices: a 1-D A is one row, a 1-D B one column.
  const size_t ra = a.dims.size(), rb = b.dims.size();
  MF_ASSIGN_OR_RETURN(SgemmOperand oa, AsSgemmOperand(m, k, ra > 1 ? a.strides[ra - 2] : k, a.strides[ra - 1]));
  MF_ASSIGN_OR_RETURN(SgemmOperand ob,
                      AsSgemmOperand(k, n, rb > 1 ? b.strides[rb - 2] : 1, rb > 1 ? b.strides[rb - 1] : 1));
  // Strides of the product's dims in y.
  std::vector<int64_t> y_strides = ops::RowMajorStrides(y_dims);
  if (!layout.perm_y.empty()) {
    std::vector<int64_t> logical(y_strides.size());
    for (size_t i = 0; i < y_strides.size(); ++i) logical[static_cast<size_t>(layout.perm_y[i])] = y_strides[i];
    y_strides = std::move(logical);
  }
  const int64_t ldc = shape.out.size() >= 2 && rb > 1 && ra > 1 ? y_strides[y_strides.size() - 2] : n;
  const std::vector<int64_t> sa = BatchStrides(a, shape.batch_a.size(), shape.batch);
  const std::vector<int64_t> sb = BatchStrides(b, shape.batch_b.size(), shape.batch);
  std::vector<int64_t> sy(shape.batch.size());
  for (size_t d = 0; d < sy.size(); ++d) sy[d] = y_strides[d];
  auto one = [&](int64_t bi) {
    int64_t rem = bi, off_a = 0, off_b = 0, off_y = 0;
    for (size_t d = shape.batch.size(); d-- > 0;) {
      const int64_t idx = rem % shape.batch[d];
      rem /= shape.batch[d];
      off_a += idx * sa[d];
      off_b += idx * sb[d];
      off_y += idx * sy[d];
    }
    return Sgemm(oa.trans, ob.trans, m, n, k, layout.scale, pa + off_a, oa.ld, pb + off_b, ob.ld, beta, y + off_y, ldc);
  };
  if (IsSmallGemm(m, n, k)) {
    // Many small products (attention's per-head scores): one thread each, side by side,
    // instead of one after another on one thread (Sgemm runs a small one serially).
    std::mutex mu;
    Status failed;
    ParallelFor(batches, 1, [&](int64_t begin, int64_t end) {
      for (int64_t bi = begin; bi < end; ++bi) {
        if (Status s = one(bi); !s.ok()) {
          std::lock_guard lock(mu);
          failed = s;
        }
      }
    });
    MF_RETURN_IF_ERROR(failed);
  } else {
    for (int64_t bi = 0; bi < batches; ++bi) MF_RETURN_IF_ERROR(one(bi));
  }
  ApplyActivation(act, y, out.num_elements());
  return Status::Ok();
}

StatusOr<BoundKernel> MatMulFactory(const KernelInit& init) {
  MF_RETURN_IF_ERROR(RequireFloat(init, 0));
  MF_RETURN_IF_ERROR(RequireFloat(init, 1));
  if (init.has_input(2)) MF_RETURN_IF_ERROR(RequireFloat(init, 2));
  MF_ASSIGN_OR_RETURN(ActivationParams act, FusedActivation(init));
  const Node::MatMulLayout layout = init.node.matmul_layout;
  FunctionKernel::Fn sgemm = [act, layout](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) {
    return RunMatMul(*in[0], *in[1], in.size() > 2 ? in[2] : nullptr, layout, act, out[0]);
  };
  if (HasConstantWeights(init) && layout.plain()) {
    return BoundKernel{MakePackedMatMulKernel({.act = act, .fallback = std::move(sgemm)}), {DataType::kFloat32}};
  }
  return Bind(std::move(sgemm), {DataType::kFloat32});
}

}  // namespace

void RegisterMatMulKernels(KernelRegistry* r) {
  r->Register({"Gemm", 7, GemmFactory, "float"});
  r->Register({"MatMul", 1, MatMulFactory, "float"});
}

}  // namespace mf::runtime::cpu
