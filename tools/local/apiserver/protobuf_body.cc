#include "tools/local/apiserver/protobuf_body.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace mf::local {
namespace {

using json = nlohmann::json;

struct Field {
  uint32_t number = 0;
  uint32_t wire_type = 0;
  uint64_t varint = 0;
  std::string_view bytes;  // wire type 2
};

class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}
  bool done() const { return pos_ >= data_.size(); }

  StatusOr<Field> Next() {
    Field f;
    MF_ASSIGN_OR_RETURN(uint64_t tag, Varint());
    f.number = static_cast<uint32_t>(tag >> 3);
    f.wire_type = static_cast<uint32_t>(tag & 7);
    if (f.number == 0) return InvalidArgument("protobuf body: field number 0");
    switch (f.wire_type) {
      case 0: {
        MF_ASSIGN_OR_RETURN(f.varint, Varint());
        break;
      }
      case 1:
        if (data_.size() - pos_ < 8) return Truncated();
        pos_ += 8;
        break;
      case 2: {
        MF_ASSIGN_OR_RETURN(uint64_t len, Varint());
        if (len > data_.size() - pos_) return Truncated();
        f.bytes = data_.substr(pos_, len);
        pos_ += len;
        break;
      }
      case 5:
        if (data_.size() - pos_ < 4) return Truncated();
        pos_ += 4;
        break;
      default:
        return InvalidArgument("protobuf body: unsupported wire type " + std::to_string(f.wire_type));
    }
    return f;
  }

 private:
  static Status Truncated() { return InvalidArgument("protobuf body: truncated message"); }
  StatusOr<uint64_t> Varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= data_.size()) return Truncated();
      uint8_t b = static_cast<uint8_t>(data_[pos_++]);
      value |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return value;
    }
    return InvalidArgument("protobuf body: varint too long");
  }

  std::string_view data_;
  size_t pos_ = 0;
};

using FieldFn = std::function<Status(const Field&)>;

// Well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF).
bool IsUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<uint8_t>(s[i]);
    size_t len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || s.size() - i < len) return false;
    uint32_t cp = len == 1 ? b : b & (0x7F >> len);
    for (size_t k = 1; k < len; ++k) {
      const auto c = static_cast<uint8_t>(s[i + k]);
      if ((c & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (c & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

// A proto string field as a JSON string. Go's protobuf rejects strings that are not UTF-8, and
// our JSON writer cannot serialize them, so they are a clear error here rather than later.
StatusOr<std::string> Text(std::string_view bytes) {
  if (!IsUtf8(bytes)) return InvalidArgument("protobuf body: a string field is not valid UTF-8");
  return std::string(bytes);
}

Status ForEachField(std::string_view message, const FieldFn& fn) {
  Reader r(message);
  while (!r.done()) {
    MF_ASSIGN_OR_RETURN(Field f, r.Next());
    MF_RETURN_IF_ERROR(fn(f));
  }
  return Status::Ok();
}

Status NeedBytes(const Field& f) {
  return f.wire_type == 2 ? Status::Ok() : InvalidArgument("protobuf body: field " + std::to_string(f.number) + " must be length-delimited");
}

std::string Base64(std::string_view in) {
  static constexpr char kTable[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    uint32_t n = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
    out += {kTable[n >> 18], kTable[(n >> 12) & 63], kTable[(n >> 6) & 63], kTable[n & 63]};
  }
  if (i + 1 == in.size()) {
    uint32_t n = uint8_t(in[i]) << 16;
    out += {kTable[n >> 18], kTable[(n >> 12) & 63], '=', '='};
  } else if (i + 2 == in.size()) {
    uint32_t n = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8);
    out += {kTable[n >> 18], kTable[(n >> 12) & 63], kTable[(n >> 6) & 63], '='};
  }
  return out;
}

// The shape of the generated.proto messages kubectl sends, as field number -> JSON name and kind.
// Fields not listed are skipped (they are server-set or not sent by kubectl create). Go's
// protobuf encoding always writes non-pointer scalars, so "", 0 and false are dropped as JSON's
// omitempty would; kOptional* are pointer fields (*int32, *bool), where a zero was set on purpose.
struct MessageDesc;
enum class Kind { kString, kInt, kOptionalInt, kBool, kOptionalBool, kBytes, kMessage, kStringMap, kBytesMap, kQuantityMap, kIntOrString };
struct FieldDesc {
  uint32_t number;
  const char* name;
  Kind kind;
  bool repeated = false;
  const MessageDesc* message = nullptr;
};
struct MessageDesc {
  std::vector<FieldDesc> fields;
};

StatusOr<json> DecodeMessage(std::string_view bytes, const MessageDesc& desc, int depth);

// map<string, string|bytes|Quantity> entries: key = 1, value = 2.
Status MapEntry(const Field& f, json& target, Kind kind) {
  MF_RETURN_IF_ERROR(NeedBytes(f));
  std::string key;
  std::string value;
  MF_RETURN_IF_ERROR(ForEachField(f.bytes, [&](const Field& e) {
    MF_RETURN_IF_ERROR(NeedBytes(e));
    if (e.number == 1) {
      MF_ASSIGN_OR_RETURN(key, Text(e.bytes));
    } else if (e.number == 2) {
      value = std::string(e.bytes);
    }
    return Status::Ok();
  }));
  if (kind == Kind::kBytesMap) {
    target[key] = Base64(value);
  } else if (kind == Kind::kQuantityMap) {
    // resource.Quantity is a message with its string form in field 1.
    std::string quantity;
    MF_RETURN_IF_ERROR(ForEachField(value, [&](const Field& q) {
      if (q.number == 1 && q.wire_type == 2) { MF_ASSIGN_OR_RETURN(quantity, Text(q.bytes)); }
      return Status::Ok();
    }));
    target[key] = quantity;
  } else {
    MF_ASSIGN_OR_RETURN(target[key], Text(value));
  }
  return Status::Ok();
}

StatusOr<json> IntOrString(std::string_view bytes) {
  int64_t type = 0;
  int64_t int_val = 0;
  std::string str_val;
  MF_RETURN_IF_ERROR(ForEachField(bytes, [&](const Field& f) -> Status {
    if (f.number == 1) type = static_cast<int64_t>(f.varint);
    if (f.number == 2) int_val = static_cast<int32_t>(f.varint);
    if (f.number == 3 && f.wire_type == 2) { MF_ASSIGN_OR_RETURN(str_val, Text(f.bytes)); }
    return Status::Ok();
  }));
  return type == 1 ? json(str_val) : json(int_val);
}

StatusOr<json> DecodeField(const Field& f, const FieldDesc& d, int depth) {
  switch (d.kind) {
    case Kind::kString: {
      MF_RETURN_IF_ERROR(NeedBytes(f));
      MF_ASSIGN_OR_RETURN(std::string text, Text(f.bytes));
      return json(std::move(text));
    }
    case Kind::kBytes:
      MF_RETURN_IF_ERROR(NeedBytes(f));
      return json(Base64(f.bytes));
    case Kind::kInt:
    case Kind::kOptionalInt:
      if (f.wire_type != 0) return InvalidArgument(std::string("protobuf body: ") + d.name + " must be a varint");
      return json(static_cast<int64_t>(f.varint));
    case Kind::kBool:
    case Kind::kOptionalBool:
      if (f.wire_type != 0) return InvalidArgument(std::string("protobuf body: ") + d.name + " must be a varint");
      return json(f.varint != 0);
    case Kind::kIntOrString:
      MF_RETURN_IF_ERROR(NeedBytes(f));
      return IntOrString(f.bytes);
    case Kind::kMessage:
      MF_RETURN_IF_ERROR(NeedBytes(f));
      return DecodeMessage(f.bytes, *d.message, depth + 1);
    case Kind::kStringMap:
    case Kind::kBytesMap:
    case Kind::kQuantityMap:
      break;
  }
  return Internal("map fields are decoded by MapEntry");
}

StatusOr<json> DecodeMessage(std::string_view bytes, const MessageDesc& desc, int depth) {
  if (depth > 32) return InvalidArgument("protobuf body: messages nested too deeply");
  json object = json::object();
  MF_RETURN_IF_ERROR(ForEachField(bytes, [&](const Field& f) -> Status {
    auto it = std::find_if(desc.fields.begin(), desc.fields.end(), [&](const FieldDesc& d) { return d.number == f.number; });
    if (it == desc.fields.end()) return Status::Ok();
    if (it->kind == Kind::kStringMap || it->kind == Kind::kBytesMap || it->kind == Kind::kQuantityMap) {
      json& map = object[it->name];
      if (map.is_null()) map = json::object();
      return MapEntry(f, map, it->kind);
    }
    MF_ASSIGN_OR_RETURN(json value, DecodeField(f, *it, depth));
    bool zero = (it->kind == Kind::kString && value == "") || (it->kind == Kind::kInt && value == 0) ||
                (it->kind == Kind::kBool && value == false);
    if (zero && !it->repeated) return Status::Ok();
    if (it->repeated) object[it->name].push_back(std::move(value));
    else object[it->name] = std::move(value);
    return Status::Ok();
  }));
  return object;
}

// Field numbers from k8s.io/api and k8s.io/apimachinery generated.proto.
const MessageDesc kObjectMeta{{{1, "name", Kind::kString}, {2, "generateName", Kind::kString}, {3, "namespace", Kind::kString},
                               {11, "labels", Kind::kStringMap}, {12, "annotations", Kind::kStringMap},
                               {14, "finalizers", Kind::kString, true}}};
const MessageDesc kLabelSelectorRequirement{{{1, "key", Kind::kString}, {2, "operator", Kind::kString}, {3, "values", Kind::kString, true}}};
const MessageDesc kLabelSelector{{{1, "matchLabels", Kind::kStringMap},
                                  {2, "matchExpressions", Kind::kMessage, true, &kLabelSelectorRequirement}}};
const MessageDesc kContainerPort{{{1, "name", Kind::kString}, {2, "hostPort", Kind::kInt}, {3, "containerPort", Kind::kInt},
                                  {4, "protocol", Kind::kString}, {5, "hostIP", Kind::kString}}};
const MessageDesc kEnvVar{{{1, "name", Kind::kString}, {2, "value", Kind::kString}}};
const MessageDesc kResources{{{1, "limits", Kind::kQuantityMap}, {2, "requests", Kind::kQuantityMap}}};
const MessageDesc kVolumeMount{{{1, "name", Kind::kString}, {2, "readOnly", Kind::kBool}, {3, "mountPath", Kind::kString},
                                {4, "subPath", Kind::kString}}};
const MessageDesc kContainer{{{1, "name", Kind::kString}, {2, "image", Kind::kString}, {3, "command", Kind::kString, true},
                              {4, "args", Kind::kString, true}, {5, "workingDir", Kind::kString},
                              {6, "ports", Kind::kMessage, true, &kContainerPort}, {7, "env", Kind::kMessage, true, &kEnvVar},
                              {8, "resources", Kind::kMessage, false, &kResources},
                              {9, "volumeMounts", Kind::kMessage, true, &kVolumeMount},
                              {13, "terminationMessagePath", Kind::kString}, {14, "imagePullPolicy", Kind::kString},
                              {16, "stdin", Kind::kBool}, {17, "stdinOnce", Kind::kBool}, {18, "tty", Kind::kBool},
                              {20, "terminationMessagePolicy", Kind::kString}}};
const MessageDesc kPodSpec{{{2, "containers", Kind::kMessage, true, &kContainer}, {3, "restartPolicy", Kind::kString},
                            {4, "terminationGracePeriodSeconds", Kind::kOptionalInt}, {5, "activeDeadlineSeconds", Kind::kOptionalInt},
                            {6, "dnsPolicy", Kind::kString}, {7, "nodeSelector", Kind::kStringMap},
                            {8, "serviceAccountName", Kind::kString}, {10, "nodeName", Kind::kString},
                            {19, "schedulerName", Kind::kString}, {20, "initContainers", Kind::kMessage, true, &kContainer}}};
const MessageDesc kPodTemplateSpec{{{1, "metadata", Kind::kMessage, false, &kObjectMeta}, {2, "spec", Kind::kMessage, false, &kPodSpec}}};
const MessageDesc kRollingUpdateDeployment{{{1, "maxUnavailable", Kind::kIntOrString}, {2, "maxSurge", Kind::kIntOrString}}};
const MessageDesc kDeploymentStrategy{{{1, "type", Kind::kString}, {2, "rollingUpdate", Kind::kMessage, false, &kRollingUpdateDeployment}}};
const MessageDesc kDeploymentSpec{{{1, "replicas", Kind::kOptionalInt}, {2, "selector", Kind::kMessage, false, &kLabelSelector},
                                   {3, "template", Kind::kMessage, false, &kPodTemplateSpec},
                                   {4, "strategy", Kind::kMessage, false, &kDeploymentStrategy}, {5, "minReadySeconds", Kind::kInt},
                                   {6, "revisionHistoryLimit", Kind::kOptionalInt}, {7, "paused", Kind::kBool},
                                   {9, "progressDeadlineSeconds", Kind::kOptionalInt}}};
const MessageDesc kServicePort{{{1, "name", Kind::kString}, {2, "protocol", Kind::kString}, {3, "port", Kind::kInt},
                                {4, "targetPort", Kind::kIntOrString}, {5, "nodePort", Kind::kInt}, {6, "appProtocol", Kind::kString}}};
const MessageDesc kServiceSpec{{{1, "ports", Kind::kMessage, true, &kServicePort}, {2, "selector", Kind::kStringMap},
                                {3, "clusterIP", Kind::kString}, {4, "type", Kind::kString}, {5, "externalIPs", Kind::kString, true},
                                {7, "sessionAffinity", Kind::kString}, {10, "externalName", Kind::kString}}};
const MessageDesc kPolicyRule{{{1, "verbs", Kind::kString, true}, {2, "apiGroups", Kind::kString, true},
                               {3, "resources", Kind::kString, true}, {4, "resourceNames", Kind::kString, true},
                               {5, "nonResourceURLs", Kind::kString, true}}};
const MessageDesc kRoleRef{{{1, "apiGroup", Kind::kString}, {2, "kind", Kind::kString}, {3, "name", Kind::kString}}};
const MessageDesc kSubject{{{1, "kind", Kind::kString}, {2, "apiGroup", Kind::kString}, {3, "name", Kind::kString},
                            {4, "namespace", Kind::kString}}};
const MessageDesc kNamespaceSpec{{{1, "finalizers", Kind::kString, true}}};

const MessageDesc kNamespace{{{1, "metadata", Kind::kMessage, false, &kObjectMeta}, {2, "spec", Kind::kMessage, false, &kNamespaceSpec}}};
const MessageDesc kConfigMap{{{1, "metadata", Kind::kMessage, false, &kObjectMeta}, {2, "data", Kind::kStringMap},
                              {3, "binaryData", Kind::kBytesMap}, {4, "immutable", Kind::kOptionalBool}}};
const MessageDesc kSecret{{{1, "metadata", Kind::kMessage, false, &kObjectMeta}, {2, "data", Kind::kBytesMap},
                           {3, "type", Kind::kString}, {4, "stringData", Kind::kStringMap}, {5, "immutable", Kind::kOptionalBool}}};
const MessageDesc kServiceAccount{{{1, "metadata", Kind::kMessage, false, &kObjectMeta}}};
const MessageDesc kDeployment{{{1, "metadata", Kind::kMessage, false, &kObjectMeta}, {2, "spec", Kind::kMessage, false, &kDeploymentSpec}}};
const MessageDesc kService{{{1, "metadata", Kind::kMessage, false, &kObjectMeta}, {2, "spec", Kind::kMessage, false, &kServiceSpec}}};
const MessageDesc kRole{{{1, "metadata", Kind::kMessage, false, &kObjectMeta}, {2, "rules", Kind::kMessage, true, &kPolicyRule}}};
const MessageDesc kRoleBinding{{{1, "metadata", Kind::kMessage, false, &kObjectMeta}, {2, "subjects", Kind::kMessage, true, &kSubject},
                                {3, "roleRef", Kind::kMessage, false, &kRoleRef}}};

const MessageDesc* TopLevel(const std::string& kind) {
  static const std::pair<const char*, const MessageDesc*> kKinds[] = {
      {"Namespace", &kNamespace},   {"ConfigMap", &kConfigMap},       {"Secret", &kSecret},
      {"ServiceAccount", &kServiceAccount}, {"Deployment", &kDeployment}, {"Service", &kService},
      {"Role", &kRole},             {"ClusterRole", &kRole},           {"RoleBinding", &kRoleBinding},
      {"ClusterRoleBinding", &kRoleBinding}};
  for (const auto& [name, desc] : kKinds) {
    if (kind == name) return desc;
  }
  return nullptr;
}

StatusOr<json> DecodeKind(const std::string& kind, std::string_view raw) {
  const MessageDesc* desc = TopLevel(kind);
  if (!desc) {
    return Unimplemented("modelfleet-local decodes protobuf bodies only for Namespace, ConfigMap, Secret, ServiceAccount, "
                         "Deployment, Service, Role, ClusterRole, RoleBinding and ClusterRoleBinding, not " + kind +
                         "; send JSON (application/json) instead");
  }
  return DecodeMessage(raw, *desc, 0);
}

}  // namespace

StatusOr<json> DecodeKubernetesProtobuf(std::string_view body) {
  static constexpr std::string_view kMagic("k8s\0", 4);
  if (body.substr(0, 4) != kMagic) return InvalidArgument("protobuf body does not start with the \"k8s\\0\" magic");
  std::string api_version;
  std::string kind;
  std::string_view raw;
  bool has_raw = false;
  MF_RETURN_IF_ERROR(ForEachField(body.substr(4), [&](const Field& f) -> Status {
    if (f.number == 1) {
      MF_RETURN_IF_ERROR(NeedBytes(f));
      return ForEachField(f.bytes, [&](const Field& t) -> Status {
        MF_RETURN_IF_ERROR(NeedBytes(t));
        if (t.number == 1) { MF_ASSIGN_OR_RETURN(api_version, Text(t.bytes)); }
        if (t.number == 2) { MF_ASSIGN_OR_RETURN(kind, Text(t.bytes)); }
        return Status::Ok();
      });
    }
    if (f.number == 2) {
      MF_RETURN_IF_ERROR(NeedBytes(f));
      raw = f.bytes;
      has_raw = true;
    }
    if (f.number == 3) {
      MF_RETURN_IF_ERROR(NeedBytes(f));
      if (!f.bytes.empty()) {
        MF_ASSIGN_OR_RETURN(std::string encoding, Text(f.bytes));
        return Unimplemented("protobuf bodies with contentEncoding " + encoding + " are not supported");
      }
    }
    return Status::Ok();
  }));
  if (kind.empty() || !has_raw) return InvalidArgument("protobuf body has no typeMeta.kind or raw object");
  MF_ASSIGN_OR_RETURN(json object, DecodeKind(kind, raw));
  object["apiVersion"] = api_version;
  object["kind"] = kind;
  return object;
}

}  // namespace mf::local
