#include "k8s/api_error.h"

#include <nlohmann/json.hpp>

namespace mf::k8s {

namespace {

StatusCode CodeForHttp(int http, const std::string& reason) {
  switch (http) {
    case 400:
      return StatusCode::kInvalidArgument;
    case 401:
      return StatusCode::kUnauthenticated;
    case 403:
      return StatusCode::kPermissionDenied;
    case 404:
      return StatusCode::kNotFound;
    case 405:
      return StatusCode::kUnimplemented;
    case 409:
      return reason == "AlreadyExists" ? StatusCode::kAlreadyExists : StatusCode::kAborted;
    case 410:
      return StatusCode::kOutOfRange;
    case 415:
      return StatusCode::kInvalidArgument;
    case 422:
      return StatusCode::kInvalidArgument;
    case 429:
      return StatusCode::kResourceExhausted;
    case 500:
      return StatusCode::kInternal;
    case 501:
      return StatusCode::kUnimplemented;
    case 503:
      return StatusCode::kUnavailable;
    case 504:
      return StatusCode::kDeadlineExceeded;
    default:
      break;
  }
  if (http >= 500) return StatusCode::kUnavailable;
  if (http >= 400) return StatusCode::kFailedPrecondition;
  return StatusCode::kUnknown;
}

// Reason/message/code from a Status object; empty strings when the body is not one.
struct ParsedStatus {
  std::string reason, message;
  int code = 0;
};

ParsedStatus Parse(const std::string& body) {
  ParsedStatus out;
  const auto j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return out;
  if (auto it = j.find("reason"); it != j.end() && it->is_string()) out.reason = *it;
  if (auto it = j.find("message"); it != j.end() && it->is_string()) out.message = *it;
  if (auto it = j.find("code"); it != j.end() && it->is_number_integer()) out.code = it->get<int>();
  return out;
}

Status Make(int http, ParsedStatus parsed, const std::string& fallback_body, const std::string& what) {
  if (parsed.reason.empty()) {
    // Not a Status object (a proxy's HTML page, say): keep a bounded excerpt of the body.
    parsed.message = fallback_body.substr(0, 256);
  }
  if (parsed.reason.empty() && http == 410) parsed.reason = "Gone";
  std::string message = what + ": ";
  if (!parsed.reason.empty()) message += parsed.reason + ": ";
  message += parsed.message.empty() ? "(no message)" : parsed.message;
  message += " (HTTP " + std::to_string(http) + ")";
  return Status(CodeForHttp(http, parsed.reason), std::move(message));
}

}  // namespace

Status StatusFromResponse(const HttpResponse& response, const std::string& what) {
  return Make(response.status, Parse(response.body), response.body, what);
}

Status StatusFromStatusObject(const std::string& status_json, const std::string& what) {
  ParsedStatus parsed = Parse(status_json);
  const int http = parsed.code ? parsed.code : 500;
  return Make(http, std::move(parsed), status_json, what);
}

bool IsNotFound(const Status& s) { return s.code() == StatusCode::kNotFound; }
bool IsAlreadyExists(const Status& s) { return s.code() == StatusCode::kAlreadyExists; }
bool IsConflict(const Status& s) { return s.code() == StatusCode::kAborted; }
bool IsGone(const Status& s) { return s.code() == StatusCode::kOutOfRange; }

}  // namespace mf::k8s
