#include "tools/local/apiserver/api_errors.h"

#include <regex>

#include "tools/local/store/store.h"

namespace mf::local {

ApiError ApiErrorFrom(const Status& s) {
  switch (s.code()) {
    case StatusCode::kNotFound: return {404, "NotFound", s.message()};
    case StatusCode::kAlreadyExists: return {409, "AlreadyExists", s.message()};
    case StatusCode::kAborted: return {409, "Conflict", s.message()};
    case StatusCode::kInvalidArgument: return {422, "Invalid", s.message()};
    case StatusCode::kPermissionDenied: return {403, "Forbidden", s.message()};
    case StatusCode::kUnimplemented: return {415, "UnsupportedMediaType", s.message()};
    case StatusCode::kOutOfRange:
      if (IsResourceVersionTooOld(s)) return {410, "Expired", s.message()};
      return {400, "BadRequest", s.message()};
    case StatusCode::kFailedPrecondition: return {400, "BadRequest", s.message()};
    case StatusCode::kResourceExhausted: return {429, "TooManyRequests", s.message()};
    case StatusCode::kUnavailable: return {503, "ServiceUnavailable", s.message()};
    default: return {500, "InternalError", s.message()};
  }
}

ApiError BadRequest(std::string message) { return {400, "BadRequest", std::move(message)}; }

namespace {

// "Kind.group \"name\" is invalid: [a: x, b: y]" -> causes [{field: a, message: x}, ...], which
// kubectl prints as "The Kind \"name\" is invalid: a: x".
nlohmann::json InvalidCauses(const std::string& message) {
  nlohmann::json causes = nlohmann::json::array();
  const std::string marker = " is invalid: ";
  size_t at = message.find(marker);
  if (at == std::string::npos) return causes;
  std::string rest = message.substr(at + marker.size());
  if (rest.size() >= 2 && rest.front() == '[' && rest.back() == ']') rest = rest.substr(1, rest.size() - 2);
  // Split at ", " followed by a field path and ": " (messages themselves may contain ", ").
  static const std::regex kNext(R"(, (?=[A-Za-z0-9_.\[\]<>-]+: ))");
  for (std::sregex_token_iterator it(rest.begin(), rest.end(), kNext, -1), end; it != end; ++it) {
    std::string item = *it;
    size_t colon = item.find(": ");
    if (colon == std::string::npos) {
      causes.push_back({{"reason", "FieldValueInvalid"}, {"message", item}, {"field", ""}});
    } else {
      causes.push_back({{"reason", "FieldValueInvalid"}, {"message", item.substr(colon + 2)}, {"field", item.substr(0, colon)}});
    }
  }
  return causes;
}

}  // namespace

nlohmann::json StatusObject(const ApiError& error, const nlohmann::json& details) {
  nlohmann::json status = {{"kind", "Status"},   {"apiVersion", "v1"},        {"metadata", nlohmann::json::object()},
                           {"status", "Failure"}, {"message", error.message}, {"reason", error.reason},
                           {"code", error.code}};
  if (!details.is_null()) status["details"] = details;
  if (error.code == 422) {
    nlohmann::json causes = InvalidCauses(error.message);
    if (!causes.empty()) status["details"]["causes"] = causes;
    // For Invalid, kube-apiserver names the kind ("Widget"), not the resource.
    size_t space = error.message.find(" \"");
    if (space != std::string::npos) {
      std::string qualified = error.message.substr(0, space);
      status["details"]["kind"] = qualified.substr(0, qualified.find('.'));
    }
  }
  return status;
}

http::Response ErrorResponse(const ApiError& error, const nlohmann::json& details) {
  return JsonResponse(error.code, StatusObject(error, details));
}

http::Response JsonResponse(int code, const nlohmann::json& body) {
  return http::Response::Json(code, body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

}  // namespace mf::local
