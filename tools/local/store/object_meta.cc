#include "tools/local/store/object_meta.h"

#include <charconv>
#include <ctime>

namespace mf::local {

using json = nlohmann::json;

namespace {
const json& Metadata(const json& object) {
  static const json kEmpty = json::object();
  if (!object.is_object()) return kEmpty;
  auto it = object.find("metadata");
  return it != object.end() && it->is_object() ? *it : kEmpty;
}

std::string StringField(const json& object, const char* field) {
  const json& meta = Metadata(object);
  auto it = meta.find(field);
  return it != meta.end() && it->is_string() ? it->get<std::string>() : "";
}
}  // namespace

const json& Labels(const json& object) {
  static const json kNull;
  const json& meta = Metadata(object);
  auto it = meta.find("labels");
  return it != meta.end() ? *it : kNull;
}

std::string Uid(const json& object) { return StringField(object, "uid"); }
std::string ResourceVersionOf(const json& object) { return StringField(object, "resourceVersion"); }

std::vector<std::string> Finalizers(const json& object) {
  std::vector<std::string> out;
  const json& meta = Metadata(object);
  auto it = meta.find("finalizers");
  if (it == meta.end() || !it->is_array()) return out;
  for (const auto& f : *it) {
    if (f.is_string()) out.push_back(f.get<std::string>());
  }
  return out;
}

std::vector<json> OwnerReferences(const json& object) {
  std::vector<json> out;
  const json& meta = Metadata(object);
  auto it = meta.find("ownerReferences");
  if (it == meta.end() || !it->is_array()) return out;
  for (const auto& ref : *it) {
    if (ref.is_object()) out.push_back(ref);
  }
  return out;
}

bool IsBeingDeleted(const json& object) {
  const json& meta = Metadata(object);
  auto it = meta.find("deletionTimestamp");
  return it != meta.end() && !it->is_null();
}

std::string FormatTime(std::chrono::system_clock::time_point t) {
  std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

uint64_t ParseVersion(const std::string& text) {
  uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size()) return 0;
  return value;
}

Status ValidateMetadataTypes(const json& meta) {
  if (!meta.is_object()) return InvalidArgument("metadata must be an object");
  for (const char* field : {"name", "generateName", "namespace"}) {
    if (meta.contains(field) && !meta[field].is_string()) {
      return InvalidArgument(std::string("metadata.") + field + " must be a string");
    }
  }
  for (const char* field : {"labels", "annotations"}) {
    if (!meta.contains(field) || meta[field].is_null()) continue;
    if (!meta[field].is_object()) return InvalidArgument(std::string("metadata.") + field + " must be a map of strings");
    for (const auto& [key, value] : meta[field].items()) {
      if (!value.is_string()) return InvalidArgument(std::string("metadata.") + field + "." + key + " must be a string");
    }
  }
  if (meta.contains("finalizers") && !meta["finalizers"].is_null()) {
    if (!meta["finalizers"].is_array()) return InvalidArgument("metadata.finalizers must be a list of strings");
    for (const auto& f : meta["finalizers"]) {
      if (!f.is_string()) return InvalidArgument("metadata.finalizers must be a list of strings");
    }
  }
  if (meta.contains("ownerReferences") && !meta["ownerReferences"].is_null()) {
    const json& refs = meta["ownerReferences"];
    if (!refs.is_array()) return InvalidArgument("metadata.ownerReferences must be a list");
    for (size_t i = 0; i < refs.size(); ++i) {
      for (const char* field : {"apiVersion", "kind", "name", "uid"}) {
        if (!refs[i].is_object() || !refs[i].contains(field) || !refs[i][field].is_string()) {
          return InvalidArgument("metadata.ownerReferences[" + std::to_string(i) + "]." + field + ": Required value");
        }
      }
    }
  }
  return Status::Ok();
}

Status ValidateObjectName(const std::string& name) {
  auto invalid = [&](const std::string& why) {
    return InvalidArgument("metadata.name: Invalid value: \"" + name + "\": " + why);
  };
  if (name.empty()) return invalid("must not be empty");
  if (name.size() > 253) return invalid("must be no more than 253 characters");
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
    if (!ok) {
      return invalid("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                     "characters, '-' or '.', and must start and end with an alphanumeric character");
    }
  }
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(name.front()) || !alnum(name.back())) {
    return invalid("must start and end with an alphanumeric character");
  }
  return Status::Ok();
}

}  // namespace mf::local
