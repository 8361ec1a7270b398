#include "tools/local/kubelet/gpu_devices.h"

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "tools/local/kubelet/process.h"

namespace mf::local {

int CountGpusInNvidiaSmiList(std::string_view text) {
  int count = 0;
  std::istringstream lines{std::string(text)};
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("GPU ", 0) == 0 && line.find(':') != std::string::npos) ++count;
  }
  return count;
}

int CountNvidiaDeviceNodes(const std::filesystem::path& dev_dir) {
  int count = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dev_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 6 && name.rfind("nvidia", 0) == 0 &&
        name.find_first_not_of("0123456789", 6) == std::string::npos) {
      ++count;
    }
  }
  return count;
}

int DetectGpus(const std::filesystem::path& scratch_file) {
  SpawnSpec spec;
  spec.argv = {"nvidia-smi", "-L"};
  if (const char* path = std::getenv("PATH")) spec.env.emplace_back("PATH", path);
  spec.log_path = scratch_file;
  std::error_code ec;
  std::filesystem::create_directories(scratch_file.parent_path(), ec);
  std::filesystem::remove(scratch_file, ec);
  // A wedged driver can hang nvidia-smi: the node must register anyway.
  auto ran = RunWithTimeout(spec, std::chrono::seconds(10));
  if (ran.ok() && !ran->timed_out && ran->exit_code == 0) {
    std::ifstream in(scratch_file);
    std::string text((std::istreambuf_iterator<char>(in)), {});
    if (int count = CountGpusInNvidiaSmiList(text); count > 0) return count;
  }
  return CountNvidiaDeviceNodes("/dev");
}

StatusOr<int> GpuLimit(const Json& container) {
  const Json& limits = ObjectAt(container, {"resources", "limits"});
  auto it = limits.find(kGpuResource);
  if (it == limits.end()) return 0;
  // The API server keeps a quantity as written: "2" or 2.
  std::string text = it->is_string() ? it->get<std::string>() : it->is_number_integer() ? it->dump() : "";
  char* end = nullptr;
  const long value = text.empty() ? -1 : std::strtol(text.c_str(), &end, 10);
  if (value < 0 || *end != '\0') {
    return InvalidArgument(std::string("resources.limits[\"") + kGpuResource + "\"] must be a whole number, not " +
                           it->dump());
  }
  return static_cast<int>(value);
}

EnvList GpuEnv(const std::vector<int>& devices) {
  std::string list;
  for (int d : devices) list += (list.empty() ? "" : ",") + std::to_string(d);
  return {{"NVIDIA_VISIBLE_DEVICES", devices.empty() ? "void" : list},
          {"CUDA_VISIBLE_DEVICES", list},
          {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"}};
}

StatusOr<std::vector<int>> GpuAllocator::Allocate(const std::string& pod_uid, const std::string& container, int want) {
  std::lock_guard lock(mu_);
  if (auto it = held_.find({pod_uid, container}); it != held_.end()) return it->second;
  if (want <= 0) return std::vector<int>{};
  std::set<int> used;
  for (const auto& [owner, devices] : held_) used.insert(devices.begin(), devices.end());
  std::vector<int> free;
  for (int d = 0; d < count_; ++d) {
    if (!used.count(d)) free.push_back(d);
  }
  if (static_cast<int>(free.size()) < want) {
    return ResourceExhausted("the container asks for " + std::to_string(want) + " " + kGpuResource + " but " +
                             std::to_string(free.size()) + " of the node's " + std::to_string(count_) +
                             " are free; it starts when other pods release theirs");
  }
  free.resize(want);
  held_[{pod_uid, container}] = free;
  return free;
}

void GpuAllocator::Release(const std::string& pod_uid, const std::string& container) {
  std::lock_guard lock(mu_);
  held_.erase({pod_uid, container});
}

void GpuAllocator::ReleasePod(const std::string& pod_uid) {
  std::lock_guard lock(mu_);
  std::erase_if(held_, [&](const auto& entry) { return entry.first.first == pod_uid; });
}

}  // namespace mf::local
