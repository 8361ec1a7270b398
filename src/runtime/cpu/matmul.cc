// Gemm and MatMul: by constant weights on a oneDNN matmul with the weights packed once
// (packed_matmul.h), else on oneDNN's row-major sgemm (multi-threaded, AVX-512 where present).
#include <cstring>
#include <mutex>

#include "runtime/cpu/activation.h"
#include "runtime/cpu/cpu_common.h"
#include "runtime/cpu/packed_matmul.h"
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

// MatMul; a third input (FuseMatMulBias) is a bias of N values added to every output row.
StatusOr<BoundKernel> MatMulFactory(const KernelInit& init) {
  MF_RETURN_IF_ERROR(RequireFloat(init, 0));
  MF_RETURN_IF_ERROR(RequireFloat(init, 1));
  if (init.has_input(2)) MF_RETURN_IF_ERROR(RequireFloat(init, 2));
  MF_ASSIGN_OR_RETURN(ActivationParams act, FusedActivation(init));
  FunctionKernel::Fn sgemm = [act](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
    const Tensor& A = *in[0];
    const Tensor& B = *in[1];
    MF_ASSIGN_OR_RETURN(ops::MatMulShape shape, ops::PlanMatMul(A.shape(), B.shape()));
    int64_t m = shape.m, k = shape.k, n = shape.n;
    const Shape &batch = shape.batch, &batch_a = shape.batch_a, &batch_b = shape.batch_b, &out_shape = shape.out;
    MF_ASSIGN_OR_RETURN(out[0], Tensor::AllocateUninitialized(DataType::kFloat32, out_shape));
    float* y = out[0].data<float>();
    const float* pa = A.data<float>();
    const float* pb = B.data<float>();
    int64_t batches = NumElements(batch);
    const Tensor* bias = in.size() > 2 ? in[2] : nullptr;
    if (bias) {
      if (bias->num_elements() != n || NumElements(batch_b) != 1) {
        return InvalidArgument("a MatMul bias needs " + std::to_string(n) + " values and a shared right operand");
      }
      for (int64_t row = 0; row < batches * m; ++row) std::memcpy(y + row * n, bias->data<float>(), n * sizeof(float));
    }
    if (NumElements(batch_b) == 1 && batches > 0) {
      // Shared right operand (weights): one big GEMM over all batch rows of A.
      MF_RETURN_IF_ERROR(Sgemm(false, false, batches * m, n, k, 1.f, pa, k, pb, n, bias ? 1.f : 0.f, y, n));
    } else {
      std::vector<int64_t> st_a = BroadcastStrides(batch_a, batch), st_b = BroadcastStrides(batch_b, batch);
      auto one = [&](int64_t bi) {
        int64_t rem = bi, oa = 0, ob = 0;
        for (size_t d = batch.size(); d-- > 0;) {
          int64_t idx = rem % batch[d];
          rem /= batch[d];
          oa += idx * st_a[d];
          ob += idx * st_b[d];
        }
        return Sgemm(false, false, m, n, k, 1.f, pa + oa * m * k, k, pb + ob * k * n, n, 0.f, y + bi * m * n, n);
      };
      if (IsSmallGemm(m, n, k)) {
        // Many small products (attention's per-head scores): one thread each, side by side,
        // instead of one after another on one thread (Sgemm runs a small one serially).
        std::mutex mu;
        Status failed;
        ParallelFor(batches, 1, [&](int64_t b, int64_t e) {
          for (int64_t bi = b; bi < e; ++bi) {
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
    }
    ApplyActivation(act, y, out[0].num_elements());
    return Status::Ok();
  };
  if (HasConstantWeights(init)) {
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
