#include "runtime/cpu/packed_matmul.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "runtime/cpu/cpu_common.h"
#include "runtime/cpu/dnnl_engine.h"
#include "runtime/cpu/panel_gemm.h"

namespace mf::runtime::cpu {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;

// One primitive per row count M (oneDNN specializes on it), sharing packed weights by layout.
struct PreparedMatMul {
  dnnl::matmul prim;
  memory::desc src_md, dst_md, bias_md, scratch_md;
  memory weights;  // packed, read-only
};

class PackedMatMulKernel final : public Kernel {
 public:
  explicit PackedMatMulKernel(PackedMatMulParams p) : p_(p) {}

  size_t owned_bytes() const override {
    std::lock_guard lock(mu_);
    size_t bytes = panel_ ? panel_->bytes() : 0;
    for (const auto& [desc, copy] : packed_) bytes += copy.get_desc().get_size();
    return bytes;
  }

  Status Run(const std::vector<const Tensor*>& in, std::vector<Tensor>& out) const override {
    const Tensor& a = *in[0];
    const Tensor& w = *in[1];
    const Tensor* bias = in.size() > 2 ? in[2] : nullptr;
    if (w.rank() != 2) return p_.fallback(in, out);
    const int64_t k = p_.transposed_weights ? w.dim(1) : w.dim(0), n = p_.transposed_weights ? w.dim(0) : w.dim(1);
    const bool fits = a.rank() >= 1 && (!p_.gemm || a.rank() == 2) && a.dim(a.rank() - 1) == k &&
                      (!bias || bias->num_elements() == n);
    const int64_t m = fits && k > 0 ? a.num_elements() / k : 0;
    // Small products and few rows stay on sgemm: a few rows by a matrix are bound by reading it,
    // which packing does not change, and packing them (a batch-1 warm-up of an MLP) would hold
    // the weights twice from the load on; the plain copy stays for sgemm. More rows pay for a
    // packed copy (kept beside the plain one: owned_bytes() counts it).
    constexpr int64_t kMinPackedRows = 8;
    if (!fits || m < kMinPackedRows || n == 0 || k == 0 || IsSmallGemm(m, n, k)) return p_.fallback(in, out);
    Shape out_shape = a.shape();
    out_shape.back() = n;
    MF_ASSIGN_OR_RETURN(out[0], Tensor::AllocateUninitialized(DataType::kFloat32, out_shape));
    if (PanelGemm::Best() == PanelGemm::Isa::kAvx2) {
      MF_ASSIGN_OR_RETURN(std::shared_ptr<const PanelGemm> panel, Panels(w, k, n));
      PanelGemm::Epilogue epilogue;
      epilogue.bias = bias ? bias->data<float>() : nullptr;
      epilogue.act = p_.act;
      panel->Run(m, PanelGemm::MatrixRows(a.data<float>(), k), out[0].data<float>(), n, epilogue);
      return Status::Ok();
    }
    MF_ASSIGN_OR_RETURN(std::shared_ptr<const PreparedMatMul> prep, Prepare(m, k, n, w, bias != nullptr));
    try {
      dnnl::engine& eng = CpuEngine();
      memory src(prep->src_md, eng, const_cast<void*>(a.raw_data()));
      memory dst(prep->dst_md, eng, out[0].raw_data());
      memory scratch(prep->scratch_md, eng, ThreadScratchpad(prep->scratch_md.get_size()));
      memory bias_mem;
      if (bias) bias_mem = memory(prep->bias_md, eng, const_cast<void*>(bias->raw_data()));
      Execute(prep->prim, {{DNNL_ARG_SRC, &src},
                           {DNNL_ARG_WEIGHTS, &prep->weights},
                           {DNNL_ARG_DST, &dst},
                           {DNNL_ARG_SCRATCHPAD, &scratch},
                           {DNNL_ARG_BIAS, &bias_mem}});
      ThreadStream().wait();
    } catch (const dnnl::error& e) {
      return DnnlError(e, p_.gemm ? "Gemm" : "MatMul");
    }
    return Status::Ok();
  }

 private:
  // On AVX2 alone, oneDNN 2.6's matmul runs sgemm on plain weights (gemm:jit, `ab`), which packs
  // B again on every call; PanelGemm's panels are packed once.
  StatusOr<std::shared_ptr<const PanelGemm>> Panels(const Tensor& w, int64_t k, int64_t n) const {
    std::lock_guard lock(mu_);
    if (panel_) return panel_;
    const float* plain = w.data<float>();
    std::vector<float> transposed;  // Pack reads [N, K]
    if (!p_.transposed_weights) {
      transposed.resize(static_cast<size_t>(k * n));
      for (int64_t kk = 0; kk < k; ++kk) {
        for (int64_t j = 0; j < n; ++j) transposed[static_cast<size_t>(j * k + kk)] = plain[kk * n + j];
      }
      plain = transposed.data();
    }
    panel_ = PanelGemm::Pack(plain, k, n, /*taps=*/1);
    if (!panel_) return ResourceExhausted("out of memory packing MatMul weights");
    return panel_;
  }

  StatusOr<std::shared_ptr<const PreparedMatMul>> Prepare(int64_t m, int64_t k, int64_t n, const Tensor& w,
                                                          bool has_bias) const {
    const Key key{m, has_bias};
    {
      std::lock_guard lock(mu_);
      if (auto it = cache_.find(key); it != cache_.end()) return it->second;
    }
    auto prep = std::make_shared<PreparedMatMul>();
    try {
      dnnl::engine& eng = CpuEngine();
      prep->src_md = memory::desc({m, k}, memory::data_type::f32, Tag::ab);
      prep->dst_md = memory::desc({m, n}, memory::data_type::f32, Tag::ab);
      if (has_bias) prep->bias_md = memory::desc({1, n}, memory::data_type::f32, Tag::ab);
      memory::desc any_weights({k, n}, memory::data_type::f32, Tag::any);
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      dnnl::post_ops ops;
      AppendActivation(p_.act, ops);
      attr.set_post_ops(ops);
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(prep->src_md, any_weights, prep->bias_md, prep->dst_md), attr,
                                      eng);
      prep->prim = dnnl::matmul(pd);
      prep->scratch_md = pd.scratchpad_desc();
      const memory::desc weights_md = pd.weights_desc();
      std::lock_guard lock(mu_);
      auto packed = std::find_if(packed_.begin(), packed_.end(), [&](const auto& c) { return c.first == weights_md; });
      if (packed == packed_.end()) {
        memory user({{k, n}, memory::data_type::f32, p_.transposed_weights ? Tag::ba : Tag::ab}, eng,
                    const_cast<void*>(w.raw_data()));
        memory copy(weights_md, eng);
        dnnl::stream stream(eng);
        dnnl::reorder(user, copy).execute(stream, user, copy);
        stream.wait();
        packed_.emplace_back(weights_md, copy);
        packed = std::prev(packed_.end());
      }
      prep->weights = packed->second;
      cache_[key] = prep;
    } catch (const dnnl::error& e) {
      return DnnlError(e, p_.gemm ? "Gemm" : "MatMul");
    }
    return std::shared_ptr<const PreparedMatMul>(prep);
  }

  const PackedMatMulParams p_;
  mutable std::mutex mu_;
  using Key = std::pair<int64_t, bool>;  // rows, bias
  mutable std::map<Key, std::shared_ptr<const PreparedMatMul>> cache_;
  mutable std::vector<std::pair<memory::desc, memory>> packed_;
  mutable std::shared_ptr<const PanelGemm> panel_;
};

}  // namespace

std::unique_ptr<Kernel> MakePackedMatMulKernel(PackedMatMulParams params) {
  return std::make_unique<PackedMatMulKernel>(params);
}

}  // namespace mf::runtime::cpu
