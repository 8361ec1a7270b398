// Device-side helpers shared by the .cu kernel files: element-type dispatch, float conversion
// for half, launch geometry and the broadcasting indexer.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "runtime/cuda/cuda_common.h"

namespace mf::runtime::cuda {

inline constexpr int kMaxDims = 8;
inline constexpr int kThreads = 256;

inline unsigned BlocksFor(int64_t n, int threads = kThreads) {
  int64_t blocks = (n + threads - 1) / threads;
  // Grid-stride loops cover the rest; 2^20 blocks saturate any GPU we serve on.
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > (1 << 20) ? (1 << 20) : blocks));
}

// Arithmetic in float for half (the hardware has no half transcendental functions we trust to
// ONNX tolerances), native otherwise.
template <typename T>
struct Compute {
  using type = T;
};
template <>
struct Compute<__half> {
  using type = float;
};

template <typename T>
__device__ __forceinline__ typename Compute<T>::type Load(const T* p, int64_t i) {
  return p[i];
}
template <>
__device__ __forceinline__ float Load<__half>(const __half* p, int64_t i) {
  return __half2float(p[i]);
}

template <typename T, typename V>
__device__ __forceinline__ void Store(T* p, int64_t i, V v) {
  p[i] = static_cast<T>(v);
}
template <typename V>
__device__ __forceinline__ void Store(__half* p, int64_t i, V v) {
  p[i] = __float2half(static_cast<float>(v));
}

// Maps a linear index of the output to the linear index of one broadcast input. Strides are 0
// along broadcast dims. Built on the host, passed by value to kernels.
struct Broadcast {
  int rank = 0;
  int64_t out_dims[kMaxDims] = {};
  int64_t in_strides[kMaxDims] = {};

  __device__ __forceinline__ int64_t Offset(int64_t linear) const {
    int64_t offset = 0;
    for (int d = rank - 1; d >= 0; --d) {
      int64_t q = linear / out_dims[d];
      offset += (linear - q * out_dims[d]) * in_strides[d];
      linear = q;
    }
    return offset;
  }
};

// `in` broadcast (numpy rules) to `out`, which has rank >= in's rank. INVALID_ARGUMENT when
// the shapes do not broadcast or exceed kMaxDims.
StatusOr<Broadcast> MakeBroadcast(const Shape& in, const Shape& out);

#define MF_GRID_STRIDE_LOOP(i, n)                                                        \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

}  // namespace mf::runtime::cuda
