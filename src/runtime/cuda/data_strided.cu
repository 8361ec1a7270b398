// The strided copy behind Transpose, Slice, Concat, Split, Expand and Tile (see StridedCopy in
// data_common.h): dims are coalesced on the host, then the copy becomes a memcpy, a 2-D memcpy,
// a tiled batched transpose (through shared memory, so both the reads and the writes coalesce)
// or a general grid-stride gather.
#include <string>
#include <utility>
#include <vector>

#include "runtime/cuda/data_common.h"
#include "runtime/cuda/device_util.cuh"

namespace mf::runtime::cuda {
namespace {

struct CopyPlan {
  int rank = 0;
  int64_t dims[kMaxDims] = {};
  int64_t src_strides[kMaxDims] = {};
  int64_t dst_strides[kMaxDims] = {};
  int64_t src_base = 0;
  int64_t dst_base = 0;
};

template <typename T>
__global__ void GeneralCopyKernel(const T* __restrict__ src, T* __restrict__ dst, CopyPlan p, int64_t n) {
  MF_GRID_STRIDE_LOOP(i, n) {
    int64_t rem = i, s = p.src_base, d = p.dst_base;
    for (int k = p.rank - 1; k >= 0; --k) {
      int64_t q = rem / p.dims[k];
      int64_t idx = rem - q * p.dims[k];
      s += idx * p.src_strides[k];
      d += idx * p.dst_strides[k];
      rem = q;
    }
    dst[d] = src[s];
  }
}

constexpr int kTile = 32;
constexpr int kTileRows = 8;

// The last two dims (rows, cols) of the iteration space are contiguous along rows in the source
// (src_strides[rank-2] == 1) and along cols in the destination (dst_strides[rank-1] == 1): a
// transpose. Each block stages a 32x32 tile in shared memory; blockIdx.z walks the leading
// (batch) dims.
template <typename T>
__global__ void TiledTransposeKernel(const T* __restrict__ src, T* __restrict__ dst, CopyPlan p, int64_t batches) {
  __shared__ T tile[kTile][kTile + 1];  // +1: no bank conflicts on the transposed read
  const int r = p.rank;
  const int64_t rows = p.dims[r - 2], cols = p.dims[r - 1];
  const int64_t src_pitch = p.src_strides[r - 1], dst_pitch = p.dst_strides[r - 2];
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kTile, col0 = static_cast<int64_t>(blockIdx.x) * kTile;
  for (int64_t b = blockIdx.z; b < batches; b += gridDim.z) {
    int64_t rem = b, s = p.src_base, d = p.dst_base;
    for (int k = r - 3; k >= 0; --k) {
      int64_t q = rem / p.dims[k];
      int64_t idx = rem - q * p.dims[k];
      s += idx * p.src_strides[k];
      d += idx * p.dst_strides[k];
      rem = q;
    }
    // Read: consecutive threads take consecutive rows (contiguous in the source).
    for (int j = threadIdx.y; j < kTile; j += kTileRows) {
      int64_t row = row0 + threadIdx.x, col = col0 + j;
      if (row < rows && col < cols) tile[j][threadIdx.x] = src[s + row + col * src_pitch];
    }
    __syncthreads();
    // Write: consecutive threads take consecutive cols (contiguous in the destination).
    for (int j = threadIdx.y; j < kTile; j += kTileRows) {
      int64_t row = row0 + j, col = col0 + threadIdx.x;
      if (row < rows && col < cols) dst[d + row * dst_pitch + col] = tile[threadIdx.x][j];
    }
    __syncthreads();
  }
}

template <typename T>
Status Launch(const CopyPlan& p, const void* src_v, void* dst_v, int64_t n) {
  const T* src = static_cast<const T*>(src_v);
  T* dst = static_cast<T*>(dst_v);
  cudaStream_t stream = Current().stream;
  const int r = p.rank;
  if (r >= 2 && p.src_strides[r - 2] == 1 && p.dst_strides[r - 1] == 1) {
    int64_t batches = 1;
    for (int k = 0; k < r - 2; ++k) batches *= p.dims[k];
    int64_t grid_x = (p.dims[r - 1] + kTile - 1) / kTile, grid_y = (p.dims[r - 2] + kTile - 1) / kTile;
    if (grid_x <= (int64_t{1} << 31) - 1 && grid_y <= 65535) {
      dim3 grid(static_cast<unsigned>(grid_x), static_cast<unsigned>(grid_y),
                static_cast<unsigned>(batches < 65535 ? batches : 65535));
      TiledTransposeKernel<T><<<grid, dim3(kTile, kTileRows), 0, stream>>>(src, dst, p, batches);
      MF_CUDA_RETURN_IF_LAUNCH_FAILED();
      return Status::Ok();
    }
  }
  GeneralCopyKernel<T><<<BlocksFor(n), kThreads, 0, stream>>>(src, dst, p, n);
  MF_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

}  // namespace

Status StridedCopy(DataType dtype, const void* src, void* dst, std::vector<int64_t> dims,
                   std::vector<int64_t> src_strides, std::vector<int64_t> dst_strides, int64_t src_base,
                   int64_t dst_base) {
  if (src_strides.size() != dims.size() || dst_strides.size() != dims.size())
    return Internal("StridedCopy: rank mismatch");
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  if (n == 0) return Status::Ok();
  // Coalesce: drop dims of extent 1, merge a dim into its inner neighbour when both sides step
  // over it as one contiguous run.
  std::vector<int64_t> cd, cs, cdst;
  for (size_t k = 0; k < dims.size(); ++k) {
    if (dims[k] == 1) continue;
    if (!cd.empty() && cs.back() == src_strides[k] * dims[k] && cdst.back() == dst_strides[k] * dims[k]) {
      cd.back() *= dims[k];
      cs.back() = src_strides[k];
      cdst.back() = dst_strides[k];
      continue;
    }
    cd.push_back(dims[k]);
    cs.push_back(src_strides[k]);
    cdst.push_back(dst_strides[k]);
  }
  if (cd.size() > static_cast<size_t>(kMaxDims)) {
    return Unimplemented("a strided copy of rank " + std::to_string(cd.size()) + " on the GPU (at most " +
                         std::to_string(kMaxDims) + " dims after merging contiguous ones)");
  }
  size_t elem = ElementSize(dtype);
  cudaStream_t stream = Current().stream;
  const char* s = static_cast<const char*>(src) + src_base * static_cast<int64_t>(elem);
  char* d = static_cast<char*>(dst) + dst_base * static_cast<int64_t>(elem);
  if (cd.empty()) {  // a single element
    MF_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d, s, elem, cudaMemcpyDeviceToDevice, stream));
    return Status::Ok();
  }
  if (cd.size() == 1 && cs[0] == 1 && cdst[0] == 1) {
    MF_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d, s, static_cast<size_t>(n) * elem, cudaMemcpyDeviceToDevice, stream));
    return Status::Ok();
  }
  // cudaMemcpy2D pitches are limited to the device's memPitch (2^31 - 1 bytes on the GPUs we serve on).
  const int64_t max_pitch = (int64_t{1} << 31) - 1;
  if (cd.size() == 2 && cs[1] == 1 && cdst[1] == 1 && cs[0] >= cd[1] && cdst[0] >= cd[1] &&
      cs[0] * static_cast<int64_t>(elem) <= max_pitch && cdst[0] * static_cast<int64_t>(elem) <= max_pitch) {
    MF_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(d, static_cast<size_t>(cdst[0]) * elem, s,
                                              static_cast<size_t>(cs[0]) * elem, static_cast<size_t>(cd[1]) * elem,
                                              static_cast<size_t>(cd[0]), cudaMemcpyDeviceToDevice, stream));
    return Status::Ok();
  }
  CopyPlan p;
  p.rank = static_cast<int>(cd.size());
  for (int k = 0; k < p.rank; ++k) {
    p.dims[k] = cd[static_cast<size_t>(k)];
    p.src_strides[k] = cs[static_cast<size_t>(k)];
    p.dst_strides[k] = cdst[static_cast<size_t>(k)];
  }
  p.src_base = src_base;
  p.dst_base = dst_base;
  return DispatchBySize(dtype, [&](auto tag) -> Status { return Launch<decltype(tag)>(p, src, dst, n); });
}

}  // namespace mf::runtime::cuda
