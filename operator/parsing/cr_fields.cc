#include "parsing/cr_fields.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>

namespace mf::op {
namespace {

bool IsLabelChar(char c) {
  return std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '-';
}

std::string FormatBound(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

}  // namespace

bool IsDns1035Label(std::string_view s) {
  return !s.empty() && s.size() <= 63 && std::islower(static_cast<unsigned char>(s.front())) && s.back() != '-' &&
         std::all_of(s.begin(), s.end(), IsLabelChar);
}

bool IsDns1123Label(std::string_view s) {
  return !s.empty() && s.size() <= 63 && s.front() != '-' && s.back() != '-' &&
         std::all_of(s.begin(), s.end(), IsLabelChar);
}

Status OptionalString(const Json& obj, const char* key, const std::string& path, std::string* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return Status();
  if (!it->is_string()) return InvalidArgument(path + "." + key + " must be a string");
  *out = it->get<std::string>();
  return Status();
}

Status OptionalObject(const Json& obj, const char* key, const std::string& path, Json* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return Status();
  if (!it->is_object()) return InvalidArgument(path + "." + key + " must be an object");
  *out = *it;
  return Status();
}

Status OptionalInt(const Json& obj, const char* key, const std::string& path, int64_t min, int64_t max, int64_t* out) {
  std::optional<int64_t> read;
  MF_RETURN_IF_ERROR(OptionalInt(obj, key, path, min, max, &read));
  if (read) *out = *read;
  return Status();
}

Status OptionalInt(const Json& obj, const char* key, const std::string& path, int64_t min, int64_t max,
                   std::optional<int64_t>* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return Status();
  if (!it->is_number_integer()) return InvalidArgument(path + "." + key + " must be an integer");
  const int64_t v = it->get<int64_t>();
  if (v < min || v > max) {
    return InvalidArgument(path + "." + key + " is " + std::to_string(v) + "; it must be between " +
                           std::to_string(min) + " and " + std::to_string(max));
  }
  *out = v;
  return Status();
}

Status OptionalNumber(const Json& obj, const char* key, const std::string& path, double min, double max,
                      std::optional<double>* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return Status();
  const bool bounded = std::isfinite(min) || std::isfinite(max);
  if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < min || it->get<double>() > max) {
    return InvalidArgument(path + "." + key +
                           (bounded ? " must be a number from " + FormatBound(min) + " to " + FormatBound(max)
                                    : std::string(" must be a finite number")));
  }
  *out = it->get<double>();
  return Status();
}

Status OptionalEnum(const Json& obj, const char* key, const std::string& path, const std::vector<std::string>& allowed,
                    std::string* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null() || (it->is_string() && it->get<std::string>().empty())) return Status();
  if (it->is_string() && std::find(allowed.begin(), allowed.end(), it->get<std::string>()) != allowed.end()) {
    *out = it->get<std::string>();
    return Status();
  }
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  return InvalidArgument(path + "." + key + " must be one of " + list + "; got " + it->dump());
}

}  // namespace mf::op
