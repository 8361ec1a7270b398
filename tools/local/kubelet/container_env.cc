#include "tools/local/kubelet/container_env.h"

namespace mf::local {
namespace {

std::map<std::string, std::string> AsMap(const EnvList& env) {
  std::map<std::string, std::string> m;
  for (const auto& [k, v] : env) m[k] = v;
  return m;
}

void Set(EnvList& env, const std::string& name, std::string value) {
  for (auto& [k, v] : env) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  env.emplace_back(name, std::move(value));
}

// metadata.labels['app'] -> ("labels", "app")
std::optional<std::pair<std::string, std::string>> MapFieldPath(std::string_view path) {
  for (std::string_view map : {"metadata.labels", "metadata.annotations"}) {
    if (path.size() > map.size() + 4 && path.substr(0, map.size()) == map && path.substr(map.size(), 2) == "['" &&
        path.substr(path.size() - 2) == "']") {
      return std::make_pair(std::string(map.substr(9)),
                            std::string(path.substr(map.size() + 2, path.size() - map.size() - 4)));
    }
  }
  return std::nullopt;
}

StatusOr<std::string> FieldRefValue(const Json& pod, std::string_view path) {
  if (path == "metadata.name") return NameOf(pod);
  if (path == "metadata.namespace") return NamespaceOf(pod);
  if (path == "metadata.uid") return Uid(pod);
  if (path == "spec.nodeName") return StringAt(pod, {"spec", "nodeName"});
  if (path == "spec.serviceAccountName") return StringAt(pod, {"spec", "serviceAccountName"}, "default");
  if (path == "status.podIP") return StringAt(pod, {"status", "podIP"});
  if (path == "status.hostIP") return StringAt(pod, {"status", "hostIP"});
  if (path == "status.podIPs") return StringAt(pod, {"status", "podIP"});
  if (auto m = MapFieldPath(path)) return StringAt(pod, {"metadata", m->first, m->second});
  return InvalidArgument("fieldRef.fieldPath '" + std::string(path) + "' is not supported");
}

// Reads a key from a ConfigMap (data, then binaryData) or a Secret (data base64, stringData).
StatusOr<std::optional<std::string>> KeyValue(const ObjectLookup& lookup, std::string_view resource, const Json& ref) {
  const std::string name = StringAt(ref, {"name"});
  const std::string key = StringAt(ref, {"key"});
  const bool optional = ref.value("optional", false);
  const std::string what = resource == "secrets" ? "secret" : "configmap";
  std::optional<Json> obj = lookup(resource, name);
  if (!obj) {
    if (optional) return std::optional<std::string>();
    return NotFound(what + " \"" + name + "\" not found");
  }
  if (resource == "secrets") {
    std::string data = StringAt(*obj, {"data", key}, "\x01");
    if (data != "\x01") {
      auto decoded = DecodeBase64(data);
      if (!decoded) return InvalidArgument("secret \"" + name + "\" key " + key + " is not base64");
      return std::optional<std::string>(*decoded);
    }
    std::string plain = StringAt(*obj, {"stringData", key}, "\x01");
    if (plain != "\x01") return std::optional<std::string>(plain);
  } else {
    std::string data = StringAt(*obj, {"data", key}, "\x01");
    if (data != "\x01") return std::optional<std::string>(data);
  }
  if (optional) return std::optional<std::string>();
  return NotFound("couldn't find key " + key + " in " + what + " " + NamespaceOf(*obj) + "/" + name);
}

}  // namespace

std::string ExpandVars(std::string_view input, const std::map<std::string, std::string>& vars) {
  std::string out;
  for (size_t i = 0; i < input.size(); ++i) {
    if (input[i] != '$' || i + 1 >= input.size()) {
      out.push_back(input[i]);
      continue;
    }
    char next = input[i + 1];
    if (next == '$') {
      out.push_back('$');
      ++i;
    } else if (next == '(') {
      size_t close = input.find(')', i + 2);
      if (close == std::string_view::npos) {
        out.append(input.substr(i));
        break;
      }
      std::string name(input.substr(i + 2, close - i - 2));
      if (auto it = vars.find(name); it != vars.end()) {
        out += it->second;
      } else {
        out.append(input.substr(i, close - i + 1));
      }
      i = close;
    } else {
      out.push_back('$');
    }
  }
  return out;
}

StatusOr<EnvList> BuildContainerEnv(const Json& pod, const Json& container, const ObjectLookup& lookup) {
  EnvList env;
  if (auto from = container.find("envFrom"); from != container.end() && from->is_array()) {
    for (const Json& source : *from) {
      std::string prefix = StringAt(source, {"prefix"});
      for (const char* resource : {"configmaps", "secrets"}) {
        const char* field = std::string_view(resource) == "configmaps" ? "configMapRef" : "secretRef";
        if (!source.contains(field)) continue;
        const Json& ref = source[field];
        std::optional<Json> obj = lookup(resource, StringAt(ref, {"name"}));
        if (!obj) {
          if (ref.value("optional", false)) continue;
          return NotFound(std::string(resource == std::string_view("secrets") ? "secret" : "configmap") + " \"" +
                          StringAt(ref, {"name"}) + "\" not found");
        }
        for (const auto& [k, v] : ObjectAt(*obj, {"data"}).items()) {
          if (!v.is_string()) continue;
          std::string value = v.get<std::string>();
          if (std::string_view(resource) == "secrets") {
            auto decoded = DecodeBase64(value);
            if (!decoded) return InvalidArgument("secret key " + k + " is not base64");
            value = *decoded;
          }
          Set(env, prefix + k, std::move(value));
        }
      }
    }
  }
  if (auto list = container.find("env"); list != container.end() && list->is_array()) {
    for (const Json& var : *list) {
      std::string name = StringAt(var, {"name"});
      if (name.empty()) return InvalidArgument("env[].name is required");
      if (var.contains("value")) {
        if (!var["value"].is_string()) return InvalidArgument("env " + name + ": value must be a string");
        Set(env, name, ExpandVars(var["value"].get<std::string>(), AsMap(env)));
        continue;
      }
      const Json& from = ObjectAt(var, {"valueFrom"});
      if (from.empty()) {
        Set(env, name, "");
      } else if (from.contains("fieldRef")) {
        MF_ASSIGN_OR_RETURN(std::string v, FieldRefValue(pod, StringAt(from["fieldRef"], {"fieldPath"})));
        Set(env, name, std::move(v));
      } else if (from.contains("configMapKeyRef") || from.contains("secretKeyRef")) {
        bool secret = from.contains("secretKeyRef");
        auto v = KeyValue(lookup, secret ? "secrets" : "configmaps", from[secret ? "secretKeyRef" : "configMapKeyRef"]);
        if (!v.ok()) return v.status().WithContext("env " + name);
        if (v->has_value()) Set(env, name, **v);
      } else {
        return InvalidArgument("env " + name + ": valueFrom must hold fieldRef, configMapKeyRef or secretKeyRef");
      }
    }
  }
  return env;
}

StatusOr<std::vector<std::string>> BuildContainerArgv(const Json& container, const ImageMap& images,
                                                      const EnvList& env) {
  auto strings = [](const Json& list, const char* field) -> StatusOr<std::vector<std::string>> {
    std::vector<std::string> out;
    if (!list.contains(field) || list[field].is_null()) return out;
    if (!list[field].is_array()) return InvalidArgument(std::string(field) + " must be a list of strings");
    for (const Json& s : list[field]) {
      if (!s.is_string()) return InvalidArgument(std::string(field) + " must be a list of strings");
      out.push_back(s.get<std::string>());
    }
    return out;
  };
  MF_ASSIGN_OR_RETURN(std::vector<std::string> command, strings(container, "command"));
  MF_ASSIGN_OR_RETURN(std::vector<std::string> args, strings(container, "args"));
  std::vector<std::string> argv;
  if (!command.empty()) {
    argv = std::move(command);
  } else {
    const std::string image = StringAt(container, {"image"});
    auto program = images.Resolve(image);
    if (!program) {
      return InvalidArgument("image \"" + image +
                             "\" is not in the kubelet's image map and the container has no "
                             "command; add the image to the map or give a command");
    }
    argv.push_back(*program);
  }
  argv.insert(argv.end(), args.begin(), args.end());
  auto vars = AsMap(env);
  for (std::string& a : argv) a = ExpandVars(a, vars);
  return argv;
}

std::optional<std::string> DecodeBase64(std::string_view text) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  if (text.size() % 4 == 1) return std::nullopt;
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    int v = value(c);
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

}  // namespace mf::local
