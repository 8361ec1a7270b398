#include "k8s/config.h"

#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

namespace mf::k8s {

namespace fs = std::filesystem;

namespace {

StatusOr<std::string> ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read " + path.string());
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string TrimSpace(std::string s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  const auto last = s.find_last_not_of(" \t\r\n");
  return s.substr(first, last - first + 1);
}

const char* Env(const char* name) {
  const char* v = std::getenv(name);
  return (v && *v) ? v : nullptr;
}

}  // namespace

StatusOr<std::string> FileTokenSource::Token() {
  std::error_code ec;
  const auto mtime = fs::last_write_time(path_, ec);
  const auto size = ec ? 0 : fs::file_size(path_, ec);
  std::lock_guard lock(mu_);
  if (ec) {
    // A rotation in progress can briefly hide the file; keep serving the last good token.
    if (!token_.empty()) return token_;
    return Unauthenticated("service account token " + path_.string() + " is unreadable: " + ec.message());
  }
  if (mtime_ && *mtime_ == mtime && size_ == size) return token_;
  auto text = ReadFile(path_);
  if (!text.ok()) return text.status();
  std::string token = TrimSpace(*text);
  if (token.empty()) return Unauthenticated("service account token " + path_.string() + " is empty");
  token_ = std::move(token);
  mtime_ = mtime;
  size_ = size;
  return token_;
}

StatusOr<std::string> DecodeBase64(std::string_view text) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  int padding = 0;
  for (char c : text) {
    int v;
    if (c >= 'A' && c <= 'Z')
      v = c - 'A';
    else if (c >= 'a' && c <= 'z')
      v = c - 'a' + 26;
    else if (c >= '0' && c <= '9')
      v = c - '0' + 52;
    else if (c == '+')
      v = 62;
    else if (c == '/')
      v = 63;
    else if (c == '=') {
      ++padding;
      continue;
    } else if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
      continue;
    else
      return InvalidArgument(std::string("invalid base64 character '") + c + "'");
    if (padding > 0) return InvalidArgument("invalid base64: data after '=' padding");
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  if (bits >= 6 || padding > 2) return InvalidArgument("invalid base64: truncated input");
  return out;
}

fs::path DefaultServiceAccountDir() {
  if (const char* dir = Env("MODELFLEET_SERVICE_ACCOUNT_DIR")) return dir;
  return "/var/run/secrets/kubernetes.io/serviceaccount";
}

StatusOr<ClusterConfig> LoadInClusterConfig(const InClusterPaths& paths) {
  const char* host = Env("KUBERNETES_SERVICE_HOST");
  const char* port = Env("KUBERNETES_SERVICE_PORT");
  if (!host || !port) {
    return FailedPrecondition(
        "not running in a Kubernetes pod: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT "
        "must be set (use a kubeconfig outside a cluster)");
  }
  ClusterConfig config;
  const std::string h = host;
  // An IPv6 service address needs brackets in a URL.
  config.server = "https://" + (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" + port;
  const fs::path token_path = paths.service_account_dir / "token";
  config.token = std::make_shared<FileTokenSource>(token_path);
  if (auto t = config.token->Token(); !t.ok()) {
    return FailedPrecondition("in-cluster config: " + t.status().message());
  }
  const fs::path ca = paths.service_account_dir / "ca.crt";
  if (!fs::exists(ca)) return FailedPrecondition("in-cluster config: CA bundle " + ca.string() + " is missing");
  config.ca_file = ca.string();
  if (auto ns = ReadFile(paths.service_account_dir / "namespace"); ns.ok() && !TrimSpace(*ns).empty()) {
    config.ns = TrimSpace(*ns);
  }
  return config;
}

namespace {

// One named entry (cluster, user or context) and the directory of the file it came from.
struct Entry {
  YAML::Node node;
  fs::path dir;
};

// The union of one or more kubeconfig files: for each name the first definition wins.
struct MergedKubeconfig {
  std::map<std::string, Entry> clusters, users, contexts;
  std::string current_context;
};

Status MergeFile(const std::string& yaml_text, const fs::path& dir, MergedKubeconfig* merged) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(std::string("kubeconfig is not valid YAML: ") + e.what());
  }
  if (root.IsNull()) return Status::Ok();  // kubectl accepts empty files
  if (!root.IsMap()) return InvalidArgument("kubeconfig must be a YAML mapping");
  try {
    if (auto cc = root["current-context"]; cc && cc.IsScalar() && merged->current_context.empty()) {
      merged->current_context = cc.as<std::string>();
    }
    const std::pair<const char*, std::map<std::string, Entry>*> lists[] = {
        {"clusters", &merged->clusters}, {"users", &merged->users}, {"contexts", &merged->contexts}};
    for (const auto& [key, out] : lists) {
      const YAML::Node list = root[key];
      if (!list || list.IsNull()) continue;
      if (!list.IsSequence()) return InvalidArgument(std::string("kubeconfig: '") + key + "' must be a list");
      for (const YAML::Node& item : list) {
        if (!item.IsMap() || !item["name"] || !item["name"].IsScalar()) {
          return InvalidArgument(std::string("kubeconfig: every entry of '") + key + "' needs a name");
        }
        const std::string kind = std::string(key).substr(0, std::string(key).size() - 1);
        const YAML::Node body = item[kind];
        if (body && !body.IsMap()) {
          return InvalidArgument("kubeconfig: " + kind + " '" + item["name"].as<std::string>() + "' must be a mapping");
        }
        out->emplace(item["name"].as<std::string>(), Entry{body ? body : YAML::Node(YAML::NodeType::Map), dir});
      }
    }
  } catch (const YAML::Exception& e) {
    return InvalidArgument(std::string("kubeconfig: ") + e.what());
  }
  return Status::Ok();
}

std::string Scalar(const YAML::Node& map, const char* key) {
  const YAML::Node v = map[key];
  return v && v.IsScalar() ? v.as<std::string>() : std::string();
}

std::string Resolve(const fs::path& dir, const std::string& file) {
  if (file.empty() || fs::path(file).is_absolute()) return file;
  return (dir / file).lexically_normal().string();
}

// "<field>-data" (base64 PEM) or "<field>" (a file path); the data form wins, as in kubectl.
Status LoadPemField(const Entry& e, const char* field, std::string* file, std::string* pem) {
  const std::string data = Scalar(e.node, (std::string(field) + "-data").c_str());
  if (!data.empty()) {
    auto decoded = DecodeBase64(data);
    if (!decoded.ok()) return decoded.status().WithContext(std::string("kubeconfig ") + field + "-data");
    *pem = std::move(*decoded);
    return Status::Ok();
  }
  *file = Resolve(e.dir, Scalar(e.node, field));
  return Status::Ok();
}

StatusOr<ClusterConfig> Build(const MergedKubeconfig& merged, const std::string& context_override) {
  const std::string context_name = context_override.empty() ? merged.current_context : context_override;
  if (context_name.empty()) {
    return FailedPrecondition("kubeconfig has no current-context; set one with `kubectl config use-context`");
  }
  auto ctx = merged.contexts.find(context_name);
  if (ctx == merged.contexts.end()) return NotFound("kubeconfig has no context named '" + context_name + "'");
  ClusterConfig config;
  try {
    const std::string cluster_name = Scalar(ctx->second.node, "cluster");
    auto cluster = merged.clusters.find(cluster_name);
    if (cluster == merged.clusters.end()) {
      return NotFound("kubeconfig context '" + context_name + "' names unknown cluster '" + cluster_name + "'");
    }
    config.server = Scalar(cluster->second.node, "server");
    if (config.server.empty()) return InvalidArgument("kubeconfig cluster '" + cluster_name + "' has no server");
    if (config.server.rfind("https://", 0) != 0 && config.server.rfind("http://", 0) != 0) {
      return InvalidArgument("kubeconfig cluster '" + cluster_name + "': server '" + config.server +
                             "' must start with https:// or http://");
    }
    if (auto v = cluster->second.node["insecure-skip-tls-verify"]; v && v.IsScalar()) {
      config.insecure_skip_tls_verify = v.as<bool>();
    }
    MF_RETURN_IF_ERROR(LoadPemField(cluster->second, "certificate-authority", &config.ca_file, &config.ca_pem));

    const std::string user_name = Scalar(ctx->second.node, "user");
    if (!user_name.empty()) {
      auto user = merged.users.find(user_name);
      if (user == merged.users.end()) {
        return NotFound("kubeconfig context '" + context_name + "' names unknown user '" + user_name + "'");
      }
      MF_RETURN_IF_ERROR(
          LoadPemField(user->second, "client-certificate", &config.client_cert_file, &config.client_cert_pem));
      MF_RETURN_IF_ERROR(LoadPemField(user->second, "client-key", &config.client_key_file, &config.client_key_pem));
      const bool has_cert = !config.client_cert_file.empty() || !config.client_cert_pem.empty();
      const bool has_key = !config.client_key_file.empty() || !config.client_key_pem.empty();
      if (has_cert != has_key) {
        return InvalidArgument("kubeconfig user '" + user_name + "' needs both a client certificate and a client key");
      }
      if (const std::string token = Scalar(user->second.node, "token"); !token.empty()) {
        config.token = std::make_shared<StaticTokenSource>(token);
      } else if (const std::string file = Scalar(user->second.node, "tokenFile"); !file.empty()) {
        config.token = std::make_shared<FileTokenSource>(Resolve(user->second.dir, file));
      }
    }
    if (const std::string ns = Scalar(ctx->second.node, "namespace"); !ns.empty()) config.ns = ns;
  } catch (const YAML::Exception& e) {
    return InvalidArgument(std::string("kubeconfig: ") + e.what());
  }
  return config;
}

}  // namespace

StatusOr<ClusterConfig> ParseKubeconfig(const std::string& yaml_text, const fs::path& dir, const std::string& context) {
  MergedKubeconfig merged;
  MF_RETURN_IF_ERROR(MergeFile(yaml_text, dir, &merged));
  return Build(merged, context);
}

StatusOr<ClusterConfig> LoadKubeconfig(const std::string& context) {
  std::vector<fs::path> files;
  if (const char* list = Env("KUBECONFIG")) {
    std::stringstream in(list);
    for (std::string item; std::getline(in, item, ':');) {
      if (!item.empty()) files.emplace_back(item);
    }
  } else if (const char* home = Env("HOME")) {
    files.push_back(fs::path(home) / ".kube" / "config");
  }
  MergedKubeconfig merged;
  bool any = false;
  for (const fs::path& file : files) {
    auto text = ReadFile(file);
    if (!text.ok()) continue;  // kubectl skips missing files in KUBECONFIG
    any = true;
    MF_RETURN_IF_ERROR(MergeFile(*text, file.parent_path(), &merged).WithContext(file.string()));
  }
  if (!any) {
    return NotFound(
        "no kubeconfig found (looked at KUBECONFIG, then ~/.kube/config); "
        "run inside a pod or point KUBECONFIG at a kubeconfig file");
  }
  return Build(merged, context);
}

StatusOr<ClusterConfig> LoadDefaultConfig() {
  if (!Env("KUBECONFIG") && Env("KUBERNETES_SERVICE_HOST")) return LoadInClusterConfig();
  return LoadKubeconfig();
}

}  // namespace mf::k8s
