#include "runtime/cpu/cpu_common.h"

#include <oneapi/dnnl/dnnl.h>

namespace mf::runtime::cpu {

Status RequireFloat(const KernelInit& init, size_t i) {
  if (!init.has_input(i)) return init.Error(StatusCode::kInvalidArgument, "missing input " + std::to_string(i));
  if (init.dtype(i) != DataType::kFloat32) {
    return init.Error(StatusCode::kUnimplemented, "input " + std::to_string(i) + " of type " +
                                                      std::string(DataTypeName(init.dtype(i))) +
                                                      " is not supported (float32 only)");
  }
  return Status::Ok();
}

bool IsSmallGemm(int64_t m, int64_t n, int64_t k) {
  // At 1 MFLOP two threads already win: the encoder's 3 MFLOP QKV projection at batch 1 took
  // 26 us alone, 18 on the team (and the encoder 0.62 -> 0.59 ms per run).
  constexpr double kParallelFlops = 1e6;
  return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) < kParallelFlops;
}

Status Sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
             const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return Status::Ok();
  // Small products (an MLP layer at batch 1) finish before a thread team even wakes up; waking one
  // costs more than the work, and far more on a loaded machine. Run those on the calling thread
  // (the OpenMP thread count is a per-thread setting, so concurrent Run() calls are unaffected).
  int saved_threads = omp_get_max_threads();
  // Not when B outgrows a core's cache (256 KiB): a few rows by a large matrix are bound by
  // reading it, and each thread then reads its share from its own core's cache (MLP batch 1:
  // 0.030 -> 0.022 ms).
  constexpr int64_t kSerialWeightElements = 64 * 1024;
  bool serial = IsSmallGemm(m, n, k) && k * n <= kSerialWeightElements;
  if (serial) omp_set_num_threads(1);
  dnnl_status_t s = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  if (serial) omp_set_num_threads(saved_threads);
  if (s != dnnl_success) return Internal("oneDNN sgemm failed with status " + std::to_string(static_cast<int>(s)));
  return Status::Ok();
}

}  // namespace mf::runtime::cpu
