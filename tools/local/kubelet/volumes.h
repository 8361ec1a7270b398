// Pod volumes as host directories, and how containers see them. There is no mount namespace:
// a volumeMount's mountPath (say /models) is made visible by rewriting the container's args,
// env values, workingDir and exec-probe commands, wherever one of them is the mountPath, starts
// with "mountPath/", or is "--flag=" followed by such a path, to the host directory backing the
// volume. Each container also gets MODELFLEET_VOLUME_<NAME>=<host dir> for every mount, so
// programs that build paths at run time can find them. Paths hidden inside other strings (a JSON
// config in an env var) are not rewritten.
//   emptyDir                 -> <pod dir>/volumes/<name> (removed with the pod)
//   hostPath                 -> the path itself (created for DirectoryOrCreate, checked otherwise)
//   configMap / secret       -> <pod dir>/volumes/<name> with one file per key (items honoured)
//   projected / downwardAPI  -> <pod dir>/volumes/<name>: a bound ServiceAccount token, ConfigMap
//                               and Secret keys, pod metadata fields
//   persistentVolumeClaim    -> <data-dir>/pvc/<namespace>/<claim> (shared by pods of the claim)
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tools/local/kubelet/container_env.h"

namespace mf::local {

using VolumeDirs = std::map<std::string, std::filesystem::path>;

// Creates the pod's volume directories; unsupported volume types are INVALID_ARGUMENT.
StatusOr<VolumeDirs> PrepareVolumes(const Json& pod, const std::filesystem::path& data_dir, const ObjectLookup& lookup);

class MountTable {
 public:
  static StatusOr<MountTable> ForContainer(const Json& container, const VolumeDirs& volumes);
  // Makes one file visible at `container_path` (the termination message file), rewritten as a
  // mount is; it names no volume, so it adds no MODELFLEET_VOLUME_* variable.
  void AddFile(const std::string& container_path, const std::filesystem::path& host_path);
  // `value` with a leading mountPath replaced by its host directory (longest mountPath wins).
  std::string Rewrite(const std::string& value) const;
  // MODELFLEET_VOLUME_<VOLUME NAME, upper-cased, '-' -> '_'> = host dir, one per mount; and
  // MODELFLEET_SERVICE_ACCOUNT_DIR = the host dir behind /var/run/secrets/kubernetes.io/serviceaccount
  // when a mount covers it, which in-cluster client configs (k8s/config.h) read instead of that path.
  EnvList VolumeEnv() const;

 private:
  struct Mount {
    std::string mount_path;
    std::string host_path;
    std::string volume;  // "" for a single file (AddFile)
  };
  void SortLongestFirst();
  std::vector<Mount> mounts_;  // longest mount_path first
};

}  // namespace mf::local
