// MF_HOST_DEVICE marks the few shared rules that device code evaluates per element (Resize's
// source coordinate, say): __host__ __device__ under nvcc, nothing in plain C++ builds.
#pragma once

#if defined(__CUDACC__)
#define MF_HOST_DEVICE __host__ __device__
#else
#define MF_HOST_DEVICE
#endif
