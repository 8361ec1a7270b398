// libFuzzer entry point for the watch-stream decoder in k8s::Client::Watch: the API server's
// bytes (one JSON event per line) arrive through an in-memory Transport in chunks of a
// fuzzer-chosen size, so lines split across chunks are exercised the way a socket splits them.
// The first byte picks the chunk size, the second the HTTP status (2xx streams the body;
// anything else is an error response whose body goes through the API error parser).
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "k8s/client.h"

namespace {

void Check(bool invariant) {
  if (!invariant) std::abort();
}

// Serves one watch request from fixed bytes.
class ScriptedTransport : public mf::k8s::Transport {
 public:
  ScriptedTransport(int status, std::string_view body, size_t chunk) : status_(status), body_(body), chunk_(chunk) {}

  mf::StatusOr<mf::k8s::HttpResponse> Send(const mf::k8s::HttpRequest&) override {
    return mf::Unimplemented("the watch fuzzer serves only streams");
  }

  mf::StatusOr<mf::k8s::HttpResponse> Stream(const mf::k8s::HttpRequest&, const mf::k8s::ChunkHandler& on_chunk,
                                             std::stop_token) override {
    mf::k8s::HttpResponse response;
    response.status = status_;
    if (status_ < 200 || status_ >= 300) {
      response.body = std::string(body_);
      return response;
    }
    for (size_t offset = 0; offset < body_.size(); offset += chunk_) {
      if (!on_chunk(body_.substr(offset, chunk_))) break;
    }
    return response;
  }

 private:
  const int status_;
  const std::string_view body_;
  const size_t chunk_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t chunk = static_cast<size_t>(data[0]) + 1;
  // Mostly 200 so the stream decoder gets the fuzzer's attention; the rest spread over errors.
  static constexpr int kStatuses[] = {200, 200, 200, 200, 200, 200, 400, 403, 404, 410, 429, 500, 503, 302};
  const int status = kStatuses[data[1] % (sizeof(kStatuses) / sizeof(kStatuses[0]))];
  const std::string_view body(reinterpret_cast<const char*>(data + 2), size - 2);

  auto transport = std::make_shared<ScriptedTransport>(status, body, chunk);
  mf::k8s::ClientOptions options;
  options.qps = 1e9;  // never wait on the rate limiter
  options.burst = 1'000'000;
  options.max_retries = 0;
  mf::k8s::ClusterConfig config;
  config.server = "https://fuzz.invalid";
  mf::k8s::Client client(transport, config, options);

  const mf::k8s::ResourceRef pods{.gvr = {.group = "", .version = "v1", .resource = "pods"}, .ns = "fuzz"};
  int events = 0;
  const mf::Status result = client.Watch(pods, {}, [&](mf::k8s::WatchEvent&& event) {
    Check(event.type != mf::k8s::WatchEventType::kError);  // ERROR events end the watch as a Status
    (void)event.object.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    ++events;
    return events < 1000;
  });
  if (status < 200 || status >= 300) Check(!result.ok() && events == 0);
  if (!result.ok()) Check(!result.message().empty());
  return 0;
}
