// What a Session is asked for (backend, precision, threads) and where its nodes ended up: the
// vocabulary the runtime's lower layers (kernels, backends, the CUDA plan) share with the Session
// API, in a header of its own so that they need not include session.h above them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mf::runtime {

enum class Backend : uint8_t { kCpu, kCuda };
// "cpu" | "cuda"; false when unknown.
bool BackendFromName(std::string_view name, Backend* backend);
std::string_view BackendName(Backend backend);

enum class Precision : uint8_t {
  kFp32,  // exact: every kernel computes in float32
  kTf32,  // float32 tensors, but CUDA matrix units may round multiply inputs to TF32 (CPU: kFp32)
  kFp16,  // allows float16 compute where the backend has it (CUDA); CPU treats it as kFp32
  kBf16,  // allows bfloat16 compute where the backend has it; CPU treats it as kFp32 for now
};
// "fp32" | "tf32" | "fp16" | "bf16"; false when unknown.
bool PrecisionFromName(std::string_view name, Precision* precision);

struct SessionOptions {
  Backend backend = Backend::kCpu;
  // Intra-op threads for the CPU backend; 0 means one per available core.
  int threads = 0;
  Precision precision = Precision::kFp32;
  // Graph rewrites (constant folding, Conv+BatchNorm+ReLU and Gemm+activation fusion). Turning
  // them off is for debugging and for tests that compare both ways.
  bool optimize = true;
  // GPU ordinal for Backend::kCuda.
  int device_id = 0;
};

// Where a session's nodes run, after graph rewrites.
struct NodePlacement {
  int device = 0;    // on the GPU (0 on the CPU backend)
  int host = 0;      // on the CPU: every node of the CPU backend; shape arithmetic on CUDA
  int fallback = 0;  // CUDA backend: nodes without a CUDA kernel, run by the CPU kernels
  std::vector<std::string> fallback_ops;
};

}  // namespace mf::runtime
