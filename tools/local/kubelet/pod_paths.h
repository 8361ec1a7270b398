// Where the local kubelet keeps each pod's files under the cluster's data directory. The API
// server's pods/log handler reads the same paths, so this header is the one place they are named:
//   <data-dir>/pods/<namespace>_<pod>/<container>.log            current container instance
//   <data-dir>/pods/<namespace>_<pod>/<container>.previous.log   the instance before the last restart
//   <data-dir>/pods/<namespace>_<pod>/<container>.termination-log  its terminationMessagePath
//   <data-dir>/pods/<namespace>_<pod>/volumes/<volume>/          emptyDir volumes
//   <data-dir>/kubelet/hosts/<namespace>                           Service DNS names (see service_hosts.h)
#pragma once

#include <filesystem>
#include <string_view>
#include <vector>

namespace mf::local {

std::filesystem::path PodDirectory(const std::filesystem::path& data_dir, std::string_view ns, std::string_view pod);
// previous = true: the log of the instance before the last restart (`kubectl logs --previous`).
std::filesystem::path ContainerLogPath(const std::filesystem::path& data_dir, std::string_view ns, std::string_view pod,
                                       std::string_view container, bool previous = false);
// "<pid> <start time>" of the container's running process (see KillStaleProcessGroup).
std::filesystem::path ContainerPidPath(const std::filesystem::path& data_dir, std::string_view ns, std::string_view pod,
                                       std::string_view container);
// The file behind the container's terminationMessagePath (termination_message.h).
std::filesystem::path ContainerTerminationMessagePath(const std::filesystem::path& data_dir, std::string_view ns,
                                                      std::string_view pod, std::string_view container);
std::filesystem::path EmptyDirPath(const std::filesystem::path& data_dir, std::string_view ns, std::string_view pod,
                                   std::string_view volume);
// The /etc/hosts-style file the processes of pods in namespace `ns` resolve Service names with
// (one per namespace, because a bare "<service>" means the pod's own namespace).
std::filesystem::path HostsFilePath(const std::filesystem::path& data_dir, std::string_view ns);
// The directory put first on PYTHONPATH: its sitecustomize.py makes Python consult the hosts file.
std::filesystem::path PythonResolverDirectory(const std::filesystem::path& data_dir);

// Every container pid file under DATA_DIR/pods, running or not.
std::vector<std::filesystem::path> AllContainerPidFiles(const std::filesystem::path& data_dir);

}  // namespace mf::local
