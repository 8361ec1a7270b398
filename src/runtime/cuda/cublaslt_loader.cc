#include "runtime/cuda/cublaslt_loader.h"

#include <cublasLt.h>
#include <dlfcn.h>

#include <string>

namespace mf::runtime::cuda {

// X(name): every cuBLASLt function the backend calls.
// Unformatted: clang-format 14 re-indents an X-macro list differently on every run.
// clang-format off
#define MF_CUBLASLT_FUNCTIONS(X)                                                                       \
  X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtMatmul) X(cublasLtMatmulAlgoGetHeuristic)             \
  X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescDestroy) X(cublasLtMatmulDescSetAttribute)           \
  X(cublasLtMatmulPreferenceCreate) X(cublasLtMatmulPreferenceDestroy)                                 \
  X(cublasLtMatmulPreferenceSetAttribute) X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy) \
  X(cublasLtMatrixLayoutSetAttribute)
// clang-format on

struct Library {
  std::string error;  // empty when every function resolved
#define MF_POINTER(name) decltype(&::name) name = nullptr;
  MF_CUBLASLT_FUNCTIONS(MF_POINTER)
#undef MF_POINTER
};

const Library& Lib() {
  static const Library lib = [] {
    Library l;
    void* handle = nullptr;
    for (const char* soname : {"libcublasLt.so.13", "libcublasLt.so"}) {
      handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
      if (handle) break;
    }
    if (!handle) {
      const char* why = dlerror();
      l.error = std::string("cannot load libcublasLt: ") + (why ? why : "not found");
      return l;
    }
#define MF_RESOLVE(name)                                              \
  l.name = reinterpret_cast<decltype(&::name)>(dlsym(handle, #name)); \
  if (!l.name && l.error.empty()) l.error = "libcublasLt has no symbol " #name;
    MF_CUBLASLT_FUNCTIONS(MF_RESOLVE)
#undef MF_RESOLVE
    return l;  // the library stays open for the life of the process
  }();
  return lib;
}

Status LoadCublasLt() {
  const Library& lib = Lib();
  return lib.error.empty() ? Status::Ok() : Unavailable(lib.error);
}

}  // namespace mf::runtime::cuda

// The forwarders, with cuBLASLt's own signatures (the header declares them extern "C").
namespace {
template <typename Fn, typename... Args>
cublasStatus_t Call(Fn fn, Args... args) {
  return fn ? fn(args...) : CUBLAS_STATUS_NOT_INITIALIZED;
}
const mf::runtime::cuda::Library& L() { return mf::runtime::cuda::Lib(); }
}  // namespace

cublasStatus_t cublasLtCreate(cublasLtHandle_t* h) { return Call(L().cublasLtCreate, h); }
cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) { return Call(L().cublasLtDestroy, h); }
cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t desc, const void* alpha, const void* a,
                              cublasLtMatrixLayout_t a_desc, const void* b, cublasLtMatrixLayout_t b_desc,
                              const void* beta, const void* c, cublasLtMatrixLayout_t c_desc, void* d,
                              cublasLtMatrixLayout_t d_desc, const cublasLtMatmulAlgo_t* algo, void* workspace,
                              size_t workspace_bytes, cudaStream_t stream) {
  return Call(L().cublasLtMatmul, h, desc, alpha, a, a_desc, b, b_desc, beta, c, c_desc, d, d_desc, algo, workspace,
              workspace_bytes, stream);
}
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                                              cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                                              cublasLtMatrixLayout_t d, cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t results[], int* returned) {
  return Call(L().cublasLtMatmulAlgoGetHeuristic, h, desc, a, b, c, d, pref, requested, results, returned);
}
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute, cudaDataType_t scale) {
  return Call(L().cublasLtMatmulDescCreate, desc, compute, scale);
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  return Call(L().cublasLtMatmulDescDestroy, desc);
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t size) {
  return Call(L().cublasLtMatmulDescSetAttribute, desc, attr, buf, size);
}
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  return Call(L().cublasLtMatmulPreferenceCreate, pref);
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  return Call(L().cublasLtMatmulPreferenceDestroy, pref);
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    size_t size) {
  return Call(L().cublasLtMatmulPreferenceSetAttribute, pref, attr, buf, size);
}
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  return Call(L().cublasLtMatrixLayoutCreate, layout, type, rows, cols, ld);
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  return Call(L().cublasLtMatrixLayoutDestroy, layout);
}
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t size) {
  return Call(L().cublasLtMatrixLayoutSetAttribute, layout, attr, buf, size);
}
