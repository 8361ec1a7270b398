#include "tools/local/kubelet/pod_paths.h"

#include <string>

namespace mf::local {

std::filesystem::path PodDirectory(const std::filesystem::path& data_dir, std::string_view ns, std::string_view pod) {
  // Namespace and pod names are DNS labels/subdomains: no '/' or '_', so the join is unambiguous.
  return data_dir / "pods" / (std::string(ns) + "_" + std::string(pod));
}

std::filesystem::path ContainerLogPath(const std::filesystem::path& data_dir, std::string_view ns, std::string_view pod,
                                       std::string_view container, bool previous) {
  return PodDirectory(data_dir, ns, pod) / (std::string(container) + (previous ? ".previous.log" : ".log"));
}

std::filesystem::path ContainerPidPath(const std::filesystem::path& data_dir, std::string_view ns, std::string_view pod,
                                       std::string_view container) {
  return PodDirectory(data_dir, ns, pod) / (std::string(container) + ".pid");
}

std::filesystem::path ContainerTerminationMessagePath(const std::filesystem::path& data_dir, std::string_view ns,
                                                      std::string_view pod, std::string_view container) {
  return PodDirectory(data_dir, ns, pod) / (std::string(container) + ".termination-log");
}

std::filesystem::path EmptyDirPath(const std::filesystem::path& data_dir, std::string_view ns, std::string_view pod,
                                   std::string_view volume) {
  return PodDirectory(data_dir, ns, pod) / "volumes" / std::string(volume);
}

std::filesystem::path HostsFilePath(const std::filesystem::path& data_dir, std::string_view ns) {
  return data_dir / "kubelet" / "hosts" / std::string(ns);
}

std::filesystem::path PythonResolverDirectory(const std::filesystem::path& data_dir) {
  return data_dir / "kubelet" / "python";
}

std::vector<std::filesystem::path> AllContainerPidFiles(const std::filesystem::path& data_dir) {
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  for (const auto& pod : std::filesystem::directory_iterator(data_dir / "pods", ec)) {
    for (const auto& file : std::filesystem::directory_iterator(pod.path(), ec)) {
      if (file.path().extension() == ".pid") out.push_back(file.path());
    }
  }
  return out;
}

}  // namespace mf::local
