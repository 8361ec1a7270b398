// GPUs as NVIDIA's device plugin and container toolkit hand them out, for processes instead of
// containers. The node advertises nvidia.com/gpu (the machine's GPUs, found with `nvidia-smi -L`
// or /dev/nvidia<N>, unless configured); each container whose limits ask for nvidia.com/gpu gets
// that many device indices of its own (the lowest free ones, held while its pod runs), and
// NVIDIA_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES list them. A container asking for none sees none
// (NVIDIA_VISIBLE_DEVICES=void, CUDA_VISIBLE_DEVICES empty), as in a GPU cluster. Without a
// physical GPU the node may still advertise some (tests do): indices are assigned all the same,
// and a program that needs CUDA fails on its own, clearly.
#pragma once

#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tools/local/kubelet/container_env.h"

namespace mf::local {

inline constexpr char kGpuResource[] = "nvidia.com/gpu";

// GPUs listed by `nvidia-smi -L` ("GPU 0: NVIDIA H100 ... (UUID: GPU-...)" per line).
int CountGpusInNvidiaSmiList(std::string_view text);
// /dev/nvidia0, /dev/nvidia1, ... (not nvidiactl, nvidia-uvm, ...).
int CountNvidiaDeviceNodes(const std::filesystem::path& dev_dir);
// This machine's GPUs: `nvidia-smi -L` (run with a timeout, its output kept in `scratch_file`),
// else the device nodes under /dev; 0 when there are none.
int DetectGpus(const std::filesystem::path& scratch_file);

// The container's nvidia.com/gpu limit (0 when absent); INVALID_ARGUMENT when not a whole number.
StatusOr<int> GpuLimit(const Json& container);

// NVIDIA_VISIBLE_DEVICES and CUDA_VISIBLE_DEVICES for these device indices ("void" and "" for
// none), and CUDA_DEVICE_ORDER=PCI_BUS_ID so CUDA numbers devices as nvidia-smi does.
EnvList GpuEnv(const std::vector<int>& devices);

// Exclusive device indices 0..count-1 per (pod uid, container). Thread-safe: pod workers share it.
class GpuAllocator {
 public:
  explicit GpuAllocator(int count) : count_(count) {}
  // The container's devices: those it holds already, else the `want` lowest free ones.
  // RESOURCE_EXHAUSTED, naming what is free, when too few are.
  StatusOr<std::vector<int>> Allocate(const std::string& pod_uid, const std::string& container, int want);
  void Release(const std::string& pod_uid, const std::string& container);
  void ReleasePod(const std::string& pod_uid);

 private:
  const int count_;
  std::mutex mu_;
  std::map<std::pair<std::string, std::string>, std::vector<int>> held_;  // (uid, container) -> indices
};

}  // namespace mf::local
