// What the kubelet API server asks of the node agent that runs the containers. The server keeps no
// state about pods: every request looks them up through these functions.
//
// The hooks are called on the server's io threads, concurrently, and must be thread-safe and quick
// (no blocking I/O, no waiting for a pod to change): they run while other connections wait.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace mf::local {

// How to run a command "inside" a running container: with its environment and working directory.
// The command inherits the server process's namespaces (the cluster network namespace included).
struct ExecTarget {
  std::vector<std::pair<std::string, std::string>> env;  // the container's complete environment
  std::filesystem::path working_dir;                     // empty: the server's own
  // Applied to every argv element before the command runs, e.g. to map a path inside the
  // container's volume mounts to where it lives on this machine. Empty: identity.
  std::function<std::string(const std::string&)> rewrite_arg;
};

struct KubeletApiHooks {
  // The log file of a container's current instance (or the previous one, when `previous`).
  // NotFound when the pod, the container or that instance is unknown.
  std::function<StatusOr<std::filesystem::path>(const std::string& ns, const std::string& pod,
                                                const std::string& container, bool previous)>
      log_path;
  // Whether the container's current instance is running now. A followed log ends once it is not,
  // after everything written to the file has been sent.
  std::function<bool(const std::string& ns, const std::string& pod, const std::string& container)> container_running;
  // For exec: NotFound (pod or container unknown), FailedPrecondition (not running) or the target.
  std::function<StatusOr<ExecTarget>(const std::string& ns, const std::string& pod, const std::string& container)>
      exec_target;
  // For port-forward: the pod's IP address; connections go to pod_ip:port. NotFound when unknown.
  std::function<StatusOr<std::string>(const std::string& ns, const std::string& pod)> pod_ip;
};

}  // namespace mf::local
