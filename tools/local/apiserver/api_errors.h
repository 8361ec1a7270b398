// Errors as kube-apiserver writes them: a meta/v1 Status object whose reason and code clients
// switch on (NotFound, AlreadyExists, Conflict, Invalid, Expired, ...).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "http/message.h"

namespace mf::local {

struct ApiError {
  int code;
  std::string reason;
  std::string message;
};

// NOT_FOUND -> 404 NotFound, ALREADY_EXISTS -> 409 AlreadyExists, ABORTED -> 409 Conflict,
// INVALID_ARGUMENT -> 422 Invalid, PERMISSION_DENIED -> 403 Forbidden, too-old resourceVersion
// -> 410 Expired, UNIMPLEMENTED -> 415 UnsupportedMediaType, others -> 400 BadRequest / 500.
ApiError ApiErrorFrom(const Status& status);
ApiError BadRequest(std::string message);

// details: {"name", "group", "kind"} as kube-apiserver fills them (kind is the resource).
nlohmann::json StatusObject(const ApiError& error, const nlohmann::json& details = nullptr);
http::Response ErrorResponse(const ApiError& error, const nlohmann::json& details = nullptr);
http::Response JsonResponse(int code, const nlohmann::json& body);

}  // namespace mf::local
