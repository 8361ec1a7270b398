#include "server/router/mirror_compare.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

namespace mf::router {
namespace {

// Structural equality with numbers compared within the tolerance (ints and floats alike).
bool Agree(const nlohmann::json& a, const nlohmann::json& b, double tolerance, int depth) {
  if (depth > 64) return a == b;
  if (a.is_number() && b.is_number()) return NumbersAgree(a.get<double>(), b.get<double>(), tolerance);
  if (a.type() != b.type()) return false;
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!Agree(a[i], b[i], tolerance, depth + 1)) return false;
    }
    return true;
  }
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (auto it = a.begin(); it != a.end(); ++it) {
      auto other = b.find(it.key());
      if (other == b.end() || !Agree(*it, *other, tolerance, depth + 1)) return false;
    }
    return true;
  }
  return a == b;
}

}  // namespace

bool NumbersAgree(double a, double b, double tolerance) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (a == b) return true;  // also equal infinities, whose difference is NaN
  return std::fabs(a - b) <= tolerance * std::max({1.0, std::fabs(a), std::fabs(b)});
}

bool ResponsesAgree(int primary_status, std::string_view primary_body, int mirror_status, std::string_view mirror_body,
                    double tolerance) {
  if (primary_status != mirror_status) return false;
  if (primary_body == mirror_body) return true;
  nlohmann::json a = nlohmann::json::parse(primary_body, nullptr, /*allow_exceptions=*/false);
  nlohmann::json b = nlohmann::json::parse(mirror_body, nullptr, /*allow_exceptions=*/false);
  if (a.is_discarded() || b.is_discarded() || !a.is_object() || !b.is_object()) return false;
  for (const char* key : {"predictions", "outputs"}) {
    auto pa = a.find(key);
    auto pb = b.find(key);
    if (pa != a.end() || pb != b.end()) {
      return pa != a.end() && pb != b.end() && Agree(*pa, *pb, tolerance, 0);
    }
  }
  return Agree(a, b, tolerance, 0);
}

}  // namespace mf::router
