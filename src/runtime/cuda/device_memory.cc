#include "runtime/cuda/device_memory.h"

#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include "runtime/cuda/cuda_common.h"

namespace mf::runtime::cuda {
namespace {

constexpr int kMaxDevices = 64;

struct Budget {
  std::atomic<bool> any_limit{false};  // lets uncapped processes skip the check on every allocation
  std::array<std::atomic<size_t>, kMaxDevices> limit{};
  std::array<std::atomic<size_t>, kMaxDevices> sync_bytes{};
  std::mutex mu;
  std::unordered_map<void*, std::pair<int, size_t>> sync_allocations;  // pointer -> (device, bytes)
};

// Never destroyed: weights may be freed during static destruction.
Budget& Get() {
  static auto* budget = new Budget();
  return *budget;
}

int CurrentDevice() {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) return 0;
  return device;
}

std::string MiB(size_t bytes) { return std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB"; }

}  // namespace

Status SetGpuMemoryFraction(int device, double fraction) {
  if (device < 0 || device >= kMaxDevices) return InvalidArgument("no GPU " + std::to_string(device));
  if (!(fraction >= 0 && fraction <= 1)) {
    return InvalidArgument("the GPU memory fraction must be in (0, 1] (0: no limit), got " + std::to_string(fraction));
  }
  int previous = 0;
  MF_CUDA_RETURN_IF_ERROR(cudaGetDevice(&previous));
  MF_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  size_t free_bytes = 0, total_bytes = 0;
  Status s = CudaError(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  const size_t limit = fraction == 0 ? 0 : static_cast<size_t>(std::floor(fraction * static_cast<double>(total_bytes)));
  // The pool gives back what it caches above the cap at each synchronization, so cached free
  // memory does not hold the process above its share either.
  cudaMemPool_t pool = nullptr;
  if (s.ok()) s = CudaError(cudaDeviceGetDefaultMemPool(&pool, device), "cudaDeviceGetDefaultMemPool");
  uint64_t threshold = limit == 0 ? UINT64_MAX : limit;
  if (s.ok())
    s = CudaError(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold),
                  "cudaMemPoolSetAttribute");
  cudaSetDevice(previous);
  MF_RETURN_IF_ERROR(s);
  Budget& b = Get();
  b.limit[static_cast<size_t>(device)].store(limit);
  bool any = false;
  for (const auto& l : b.limit) any = any || l.load() != 0;
  b.any_limit.store(any);
  return Status::Ok();
}

size_t GpuMemoryLimit(int device) {
  return device >= 0 && device < kMaxDevices ? Get().limit[static_cast<size_t>(device)].load() : 0;
}

size_t GpuMemoryInUse(int device) {
  if (device < 0 || device >= kMaxDevices) return 0;
  size_t used = Get().sync_bytes[static_cast<size_t>(device)].load();
  cudaMemPool_t pool = nullptr;
  uint64_t pool_used = 0, graph_used = 0;
  if (cudaDeviceGetDefaultMemPool(&pool, device) == cudaSuccess &&
      cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &pool_used) == cudaSuccess) {
    used += pool_used;
  }
  if (cudaDeviceGetGraphMemAttribute(device, cudaGraphMemAttrUsedMemCurrent, &graph_used) == cudaSuccess) {
    used += graph_used;
  }
  cudaGetLastError();  // a failed query leaves no sticky error behind
  return used;
}

Status CheckGpuMemoryBudget(size_t bytes) {
  if (!Get().any_limit.load(std::memory_order_relaxed)) return Status::Ok();
  const int device = CurrentDevice();
  const size_t limit = GpuMemoryLimit(device);
  if (limit == 0) return Status::Ok();
  const size_t used = GpuMemoryInUse(device);
  if (used + bytes <= limit) return Status::Ok();
  return ResourceExhausted("GPU memory limit reached on GPU " + std::to_string(device) + ": " + MiB(used) +
                           " in use + " + MiB(bytes) + " requested > the " + MiB(limit) +
                           " this process may use (--gpu_memory_fraction)");
}

StatusOr<void*> MallocCounted(size_t bytes) {
  MF_RETURN_IF_ERROR(CheckGpuMemoryBudget(bytes));
  void* p = nullptr;
  MF_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, bytes));
  const int device = CurrentDevice();
  Budget& b = Get();
  b.sync_bytes[static_cast<size_t>(device)] += bytes;
  std::lock_guard<std::mutex> lock(b.mu);
  b.sync_allocations[p] = {device, bytes};
  return p;
}

void FreeCounted(void* p) {
  if (p == nullptr) return;
  Budget& b = Get();
  {
    std::lock_guard<std::mutex> lock(b.mu);
    auto it = b.sync_allocations.find(p);
    if (it != b.sync_allocations.end()) {
      b.sync_bytes[static_cast<size_t>(it->second.first)] -= it->second.second;
      b.sync_allocations.erase(it);
    }
  }
  cudaFree(p);
}

}  // namespace mf::runtime::cuda
