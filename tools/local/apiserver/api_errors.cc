#include "tools/local/apiserver/api_errors.h"

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

nlohmann::json StatusObject(const ApiError& error, const nlohmann::json& details) {
  nlohmann::json status = {{"kind", "Status"},   {"apiVersion", "v1"},        {"metadata", nlohmann::json::object()},
                           {"status", "Failure"}, {"message", error.message}, {"reason", error.reason},
                           {"code", error.code}};
  if (!details.is_null()) status["details"] = details;
  return status;
}

http::Response ErrorResponse(const ApiError& error, const nlohmann::json& details) {
  return JsonResponse(error.code, StatusObject(error, details));
}

http::Response JsonResponse(int code, const nlohmann::json& body) {
  return http::Response::Json(code, body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

}  // namespace mf::local
