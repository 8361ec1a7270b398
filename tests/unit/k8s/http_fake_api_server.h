// Serves a FakeApiServer over real HTTP (src/http/server.h) on 127.0.0.1, so tests exercise
// HttpTransport end to end: sockets, chunked watch streams, header mapping, cancellation.
#pragma once

#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "http/server.h"
#include "tests/unit/k8s/fake_api_server.h"

namespace mf::k8s::testing {

class HttpFakeApiServer {
 public:
  explicit HttpFakeApiServer(std::shared_ptr<FakeApiServer> fake);
  ~HttpFakeApiServer();
  Status Start();
  std::string url() const { return "http://127.0.0.1:" + std::to_string(server_.port()); }

 private:
  void Handle(http::Request request, http::Responder responder);

  std::shared_ptr<FakeApiServer> fake_;
  std::mutex mu_;
  std::vector<std::jthread> streams_;  // one per open watch; stopped on destruction
  http::Server server_;
};

}  // namespace mf::k8s::testing
