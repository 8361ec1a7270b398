#include "tools/local/kubelet/volumes.h"

#include <algorithm>
#include <fstream>

#include "tools/local/kubelet/pod_paths.h"

namespace mf::local {
namespace {

// Where the ServiceAccount admission plugin mounts the kube-api-access-* volume.
constexpr char kServiceAccountMountPath[] = "/var/run/secrets/kubernetes.io/serviceaccount";

Status WriteKeys(const std::filesystem::path& dir, const Json& source, const Json& data, bool base64) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Internal("cannot create " + dir.string() + ": " + ec.message());
  auto write = [&](const std::string& key, const std::string& file) -> Status {
    if (!data.contains(key) || !data[key].is_string()) {
      return NotFound("key " + key + " not found for volume file " + file);
    }
    std::string value = data[key].get<std::string>();
    if (base64) {
      auto decoded = DecodeBase64(value);
      if (!decoded) return InvalidArgument("secret key " + key + " is not base64");
      value = *decoded;
    }
    if (file.empty() || file.find("..") != std::string::npos || file[0] == '/') {
      return InvalidArgument("volume item path \"" + file + "\" must be relative without '..'");
    }
    std::filesystem::create_directories((dir / file).parent_path(), ec);
    std::ofstream out(dir / file, std::ios::binary | std::ios::trunc);
    out << value;
    return out.flush() ? Status::Ok() : Internal("cannot write " + (dir / file).string());
  };
  if (auto items = source.find("items"); items != source.end() && items->is_array()) {
    for (const Json& item : *items) MF_RETURN_IF_ERROR(write(StringAt(item, {"key"}), StringAt(item, {"path"})));
  } else if (data.is_object()) {
    for (const auto& [key, value] : data.items()) MF_RETURN_IF_ERROR(write(key, key));
  }
  return Status::Ok();
}

// A downwardAPI item's value: the pod fields the kubelet projects (metadata.name, .namespace,
// .uid, .labels, .annotations). Containers' resources are not projected here.
StatusOr<std::string> DownwardValue(const Json& pod, const Json& item) {
  const std::string field = StringAt(item, {"fieldRef", "fieldPath"});
  auto lines = [](const Json& map) {
    std::string out;
    for (const auto& [k, v] : map.items())
      out += k + "=" + Json(v.is_string() ? v.get<std::string>() : v.dump()).dump() + "\n";
    return out;
  };
  if (field == "metadata.name") return NameOf(pod);
  if (field == "metadata.namespace") return NamespaceOf(pod);
  if (field == "metadata.uid") return Uid(pod);
  if (field == "metadata.labels") return lines(ObjectAt(pod, {"metadata", "labels"}));
  if (field == "metadata.annotations") return lines(ObjectAt(pod, {"metadata", "annotations"}));
  return InvalidArgument("downwardAPI field \"" + field + "\" is not supported locally");
}

Status WriteDownward(const std::filesystem::path& dir, const Json& pod, const Json& items) {
  Json data = Json::object();
  Json paths = Json::array();
  for (const Json& item : items.is_array() ? items : Json::array()) {
    MF_ASSIGN_OR_RETURN(std::string value, DownwardValue(pod, item));
    const std::string path = StringAt(item, {"path"});
    data[path] = value;
    paths.push_back({{"key", path}, {"path", path}});
  }
  return WriteKeys(dir, {{"items", paths}}, data, false);
}

// A projected volume (what the ServiceAccount admission plugin adds as kube-api-access-*): a
// bound token from the TokenRequest API, ConfigMaps / Secrets, and downward API fields, merged
// into one directory.
Status WriteProjected(const std::filesystem::path& dir, const Json& pod, const Json& projected,
                      const ObjectLookup& lookup) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  for (const Json& source : projected.value("sources", Json::array())) {
    if (source.contains("serviceAccountToken")) {
      const std::string account = StringAt(pod, {"spec", "serviceAccountName"}, "default");
      auto token = lookup("serviceaccounttoken", account);
      if (!token) return Unavailable("cannot get a token for service account " + account);
      const std::string path = StringAt(source, {"serviceAccountToken", "path"}, "token");
      MF_RETURN_IF_ERROR(WriteKeys(dir, {{"items", {{{"key", "token"}, {"path", path}}}}}, *token, false));
    } else if (source.contains("configMap") || source.contains("secret")) {
      const bool secret = source.contains("secret");
      const Json& ref = source[secret ? "secret" : "configMap"];
      auto found = lookup(secret ? "secrets" : "configmaps", StringAt(ref, {"name"}));
      if (!found) {
        if (ref.value("optional", false)) continue;
        return NotFound(std::string(secret ? "secret" : "configmap") + " \"" + StringAt(ref, {"name"}) +
                        "\" not found (projected volume)");
      }
      MF_RETURN_IF_ERROR(WriteKeys(dir, ref, ObjectAt(*found, {"data"}), secret));
    } else if (source.contains("downwardAPI")) {
      MF_RETURN_IF_ERROR(WriteDownward(dir, pod, source["downwardAPI"].value("items", Json::array())));
    }
  }
  return Status::Ok();
}

bool IsSafeName(const std::string& name) {
  return !name.empty() && name.find('/') == std::string::npos && name != "." && name != "..";
}

}  // namespace

StatusOr<VolumeDirs> PrepareVolumes(const Json& pod, const std::filesystem::path& data_dir,
                                    const ObjectLookup& lookup) {
  VolumeDirs dirs;
  const std::string ns = NamespaceOf(pod), name = NameOf(pod);
  const Json volumes = ObjectAt(pod, {"spec"}).value("volumes", Json::array());
  if (!volumes.is_array()) return InvalidArgument("spec.volumes must be a list");
  std::error_code ec;
  for (const Json& v : volumes) {
    const std::string vname = StringAt(v, {"name"});
    if (!IsSafeName(vname)) return InvalidArgument("volume name \"" + vname + "\" is not valid");
    std::filesystem::path dir;
    if (v.contains("emptyDir")) {
      dir = EmptyDirPath(data_dir, ns, name, vname);
      std::filesystem::create_directories(dir, ec);
    } else if (v.contains("hostPath")) {
      dir = StringAt(v, {"hostPath", "path"});
      std::string type = StringAt(v, {"hostPath", "type"});
      if (dir.empty() || !dir.is_absolute()) {
        return InvalidArgument("volume " + vname + ": hostPath.path must be an absolute path");
      }
      if (type == "DirectoryOrCreate") {
        std::filesystem::create_directories(dir, ec);
      } else if (type == "Directory" && !std::filesystem::is_directory(dir)) {
        return NotFound("volume " + vname + ": hostPath " + dir.string() + " is not a directory");
      } else if (type == "File" && !std::filesystem::is_regular_file(dir)) {
        return NotFound("volume " + vname + ": hostPath " + dir.string() + " is not a file");
      }
    } else if (v.contains("configMap") || v.contains("secret")) {
      bool secret = v.contains("secret");
      const Json& source = v[secret ? "secret" : "configMap"];
      std::string object = StringAt(source, {secret ? "secretName" : "name"});
      auto found = lookup(secret ? "secrets" : "configmaps", object);
      dir = EmptyDirPath(data_dir, ns, name, vname);
      if (!found) {
        if (!source.value("optional", false)) {
          return NotFound(std::string(secret ? "secret" : "configmap") + " \"" + object + "\" not found (volume " +
                          vname + ")");
        }
        std::filesystem::create_directories(dir, ec);
      } else {
        MF_RETURN_IF_ERROR(WriteKeys(dir, source, ObjectAt(*found, {"data"}), secret));
      }
    } else if (v.contains("projected")) {
      dir = EmptyDirPath(data_dir, ns, name, vname);
      MF_RETURN_IF_ERROR(WriteProjected(dir, pod, v["projected"], lookup));
    } else if (v.contains("downwardAPI")) {
      dir = EmptyDirPath(data_dir, ns, name, vname);
      MF_RETURN_IF_ERROR(WriteDownward(dir, pod, v["downwardAPI"].value("items", Json::array())));
    } else if (v.contains("persistentVolumeClaim")) {
      std::string claim = StringAt(v, {"persistentVolumeClaim", "claimName"});
      if (!IsSafeName(claim)) return InvalidArgument("volume " + vname + ": claimName is not valid");
      dir = data_dir / "pvc" / ns / claim;
      std::filesystem::create_directories(dir, ec);
    } else {
      return InvalidArgument("volume " + vname +
                             ": only emptyDir, hostPath, configMap, secret, projected, downwardAPI and "
                             "persistentVolumeClaim volumes are supported locally");
    }
    if (ec) return Internal("volume " + vname + ": cannot create " + dir.string() + ": " + ec.message());
    dirs[vname] = dir;
  }
  return dirs;
}

StatusOr<MountTable> MountTable::ForContainer(const Json& container, const VolumeDirs& volumes) {
  MountTable table;
  const Json mounts = container.value("volumeMounts", Json::array());
  if (!mounts.is_array()) return InvalidArgument("volumeMounts must be a list");
  for (const Json& m : mounts) {
    std::string volume = StringAt(m, {"name"});
    std::string mount_path = StringAt(m, {"mountPath"});
    auto it = volumes.find(volume);
    if (it == volumes.end()) {
      return InvalidArgument("volumeMount \"" + volume + "\" names no volume of the pod");
    }
    if (mount_path.empty() || mount_path[0] != '/') {
      return InvalidArgument("volumeMount " + volume + ": mountPath must be absolute");
    }
    while (mount_path.size() > 1 && mount_path.back() == '/') mount_path.pop_back();
    std::filesystem::path host = it->second;
    std::string sub = StringAt(m, {"subPath"});
    if (!sub.empty()) {
      if (sub[0] == '/' || sub.find("..") != std::string::npos) {
        return InvalidArgument("volumeMount " + volume + ": subPath must be relative without '..'");
      }
      host /= sub;
    }
    table.mounts_.push_back({mount_path, host.string(), volume});
  }
  table.SortLongestFirst();
  return table;
}

void MountTable::AddFile(const std::string& container_path, const std::filesystem::path& host_path) {
  mounts_.push_back({container_path, host_path.string(), ""});
  SortLongestFirst();
}

void MountTable::SortLongestFirst() {
  std::stable_sort(mounts_.begin(), mounts_.end(),
                   [](const Mount& a, const Mount& b) { return a.mount_path.size() > b.mount_path.size(); });
}

std::string MountTable::Rewrite(const std::string& value) const {
  // "--flag=/path" rewrites the part after '='.
  size_t start = 0;
  if (value.rfind("-", 0) == 0) {
    size_t eq = value.find('=');
    if (eq != std::string::npos) start = eq + 1;
  }
  std::string_view path = std::string_view(value).substr(start);
  for (const Mount& m : mounts_) {
    if (path == m.mount_path ||
        (path.size() > m.mount_path.size() && path.substr(0, m.mount_path.size()) == m.mount_path &&
         path[m.mount_path.size()] == '/')) {
      return value.substr(0, start) + m.host_path + std::string(path.substr(m.mount_path.size()));
    }
  }
  return value;
}

EnvList MountTable::VolumeEnv() const {
  EnvList env;
  for (const Mount& m : mounts_) {
    if (m.volume.empty()) continue;
    std::string name = "MODELFLEET_VOLUME_";
    for (char c : m.volume)
      name.push_back(c == '-' || c == '.' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
    env.emplace_back(name, m.host_path);
  }
  if (std::string dir = Rewrite(kServiceAccountMountPath); dir != kServiceAccountMountPath) {
    env.emplace_back("MODELFLEET_SERVICE_ACCOUNT_DIR", dir);
  }
  return env;
}

}  // namespace mf::local
