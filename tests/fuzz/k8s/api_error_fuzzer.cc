// libFuzzer entry point for the API error parser: an HTTP error response (status code chosen by
// the first two bytes, the rest as body) and a Status object from a watch ERROR event both map
// to a non-OK mf::Status with a message, whatever the server sent.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "k8s/api_error.h"

namespace {

void Check(bool invariant) {
  if (!invariant) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  mf::k8s::HttpResponse response;
  // 300..899: every error class the client may see, plus codes no server should send.
  response.status = 300 + (data[0] << 8 | data[1]) % 600;
  response.headers["content-type"] = "application/json";
  response.body.assign(reinterpret_cast<const char*>(data + 2), size - 2);

  mf::Status from_response = mf::k8s::StatusFromResponse(response, "GET /api/v1/fuzz");
  Check(!from_response.ok());
  Check(!from_response.message().empty());
  (void)mf::k8s::IsNotFound(from_response);
  (void)mf::k8s::IsConflict(from_response);
  (void)mf::k8s::IsAlreadyExists(from_response);
  (void)mf::k8s::IsGone(from_response);
  if (response.status == 404) Check(mf::k8s::IsNotFound(from_response));

  mf::Status from_object = mf::k8s::StatusFromStatusObject(response.body, "WATCH /api/v1/fuzz");
  Check(!from_object.ok());
  Check(!from_object.message().empty());
  (void)mf::k8s::IsGone(from_object);
  return 0;
}
