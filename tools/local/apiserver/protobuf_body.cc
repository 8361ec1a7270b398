#include "tools/local/apiserver/protobuf_body.h"

#include <cstdint>
#include <functional>
#include <string>

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

// map<string, string|bytes> entries: key = 1, value = 2.
Status MapEntry(const Field& f, json& target, bool bytes_value) {
  MF_RETURN_IF_ERROR(NeedBytes(f));
  std::string key;
  std::string value;
  MF_RETURN_IF_ERROR(ForEachField(f.bytes, [&](const Field& e) {
    MF_RETURN_IF_ERROR(NeedBytes(e));
    if (e.number == 1) key = std::string(e.bytes);
    else if (e.number == 2) value = std::string(e.bytes);
    return Status::Ok();
  }));
  target[key] = bytes_value ? Base64(value) : value;
  return Status::Ok();
}

StatusOr<json> ObjectMeta(std::string_view message) {
  json meta = json::object();
  MF_RETURN_IF_ERROR(ForEachField(message, [&](const Field& f) -> Status {
    switch (f.number) {
      case 1: MF_RETURN_IF_ERROR(NeedBytes(f)); meta["name"] = std::string(f.bytes); break;
      case 2: MF_RETURN_IF_ERROR(NeedBytes(f)); meta["generateName"] = std::string(f.bytes); break;
      case 3: MF_RETURN_IF_ERROR(NeedBytes(f)); meta["namespace"] = std::string(f.bytes); break;
      case 6: MF_RETURN_IF_ERROR(NeedBytes(f)); if (!f.bytes.empty()) meta["resourceVersion"] = std::string(f.bytes); break;
      case 11: return MapEntry(f, meta["labels"], false);
      case 12: return MapEntry(f, meta["annotations"], false);
      case 14: MF_RETURN_IF_ERROR(NeedBytes(f)); meta["finalizers"].push_back(std::string(f.bytes)); break;
      default: break;  // server-set or not used by the kubectl commands that send protobuf
    }
    return Status::Ok();
  }));
  return meta;
}

StatusOr<json> DecodeKind(const std::string& kind, std::string_view raw) {
  json object = json::object();
  auto metadata = [&](const Field& f) -> Status {
    MF_RETURN_IF_ERROR(NeedBytes(f));
    MF_ASSIGN_OR_RETURN(object["metadata"], ObjectMeta(f.bytes));
    return Status::Ok();
  };
  if (kind == "Namespace") {
    MF_RETURN_IF_ERROR(ForEachField(raw, [&](const Field& f) -> Status {
      if (f.number == 1) return metadata(f);
      if (f.number == 2) {
        MF_RETURN_IF_ERROR(NeedBytes(f));
        return ForEachField(f.bytes, [&](const Field& s) -> Status {
          MF_RETURN_IF_ERROR(NeedBytes(s));
          if (s.number == 1) object["spec"]["finalizers"].push_back(std::string(s.bytes));
          return Status::Ok();
        });
      }
      return Status::Ok();
    }));
  } else if (kind == "ConfigMap") {
    MF_RETURN_IF_ERROR(ForEachField(raw, [&](const Field& f) -> Status {
      if (f.number == 1) return metadata(f);
      if (f.number == 2) return MapEntry(f, object["data"], false);
      if (f.number == 3) return MapEntry(f, object["binaryData"], true);
      if (f.number == 4) object["immutable"] = f.varint != 0;
      return Status::Ok();
    }));
  } else if (kind == "Secret") {
    MF_RETURN_IF_ERROR(ForEachField(raw, [&](const Field& f) -> Status {
      if (f.number == 1) return metadata(f);
      if (f.number == 2) return MapEntry(f, object["data"], true);
      if (f.number == 3) { MF_RETURN_IF_ERROR(NeedBytes(f)); object["type"] = std::string(f.bytes); }
      if (f.number == 4) return MapEntry(f, object["stringData"], false);
      if (f.number == 5) object["immutable"] = f.varint != 0;
      return Status::Ok();
    }));
  } else if (kind == "ServiceAccount") {
    MF_RETURN_IF_ERROR(ForEachField(raw, [&](const Field& f) -> Status {
      return f.number == 1 ? metadata(f) : Status::Ok();
    }));
  } else {
    return Unimplemented("modelfleet-local decodes protobuf bodies only for Namespace, ConfigMap, Secret and "
                         "ServiceAccount, not " + kind + "; send JSON (application/json) instead");
  }
  return object;
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
        if (t.number == 1) api_version = std::string(t.bytes);
        if (t.number == 2) kind = std::string(t.bytes);
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
      if (!f.bytes.empty()) return Unimplemented("protobuf bodies with contentEncoding " + std::string(f.bytes) + " are not supported");
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
