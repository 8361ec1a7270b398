#include "tests/unit/k8s/http_fake_api_server.h"

namespace mf::k8s::testing {

namespace {

HttpRequest FromHttp(const http::Request& r) {
  HttpRequest out;
  out.method = r.method;
  out.target = r.target;
  for (const auto& [name, value] : r.headers.fields()) {
    // Keep the canonical spelling the fake looks up.
    if (http::EqualsIgnoreCase(name, "content-type"))
      out.headers["Content-Type"] = value;
    else if (http::EqualsIgnoreCase(name, "authorization"))
      out.headers["Authorization"] = value;
    else
      out.headers[name] = value;
  }
  out.body = r.body;
  return out;
}

http::Response ToHttp(const HttpResponse& r) {
  http::Response out;
  out.status = r.status;
  for (const auto& [name, value] : r.headers) out.headers.Set(name, value);
  out.body = r.body;
  return out;
}

}  // namespace

HttpFakeApiServer::HttpFakeApiServer(std::shared_ptr<FakeApiServer> fake)
    : fake_(std::move(fake)),
      server_({.address = "127.0.0.1", .port = 0, .io_threads = 2},
              [this](http::Request request, http::Responder responder) {
                Handle(std::move(request), std::move(responder));
              }) {}

HttpFakeApiServer::~HttpFakeApiServer() {
  {
    std::lock_guard lock(mu_);
    for (auto& t : streams_) t.request_stop();
  }
  server_.Stop();
  std::lock_guard lock(mu_);
  streams_.clear();  // joins
}

Status HttpFakeApiServer::Start() { return server_.Start(); }

void HttpFakeApiServer::Handle(http::Request request, http::Responder responder) {
  HttpRequest req = FromHttp(request);
  if (req.target.find("watch=true") == std::string::npos) {
    StatusOr<HttpResponse> r = fake_->Send(req);
    if (!r.ok()) {
      responder.Respond(http::Response::Text(503, r.status().message()));
      return;
    }
    responder.Respond(ToHttp(*r));
    return;
  }
  // A watch blocks until it ends: serve it from its own thread, never an io thread.
  std::lock_guard lock(mu_);
  streams_.emplace_back([this, req = std::move(req), responder](std::stop_token stop) mutable {
    std::shared_ptr<http::Stream> stream;
    StatusOr<HttpResponse> r = fake_->Stream(
        req,
        [&](std::string_view chunk) {
          if (!stream) {
            http::Headers headers;
            headers.Set("Content-Type", "application/json");
            stream = responder.StartStream(200, headers);
          }
          return stream->Write(std::string(chunk));
        },
        stop);
    if (stream) {
      stream->Close();  // a dropped watch looks like the server ending it
    } else if (r.ok() && r->status >= 300) {
      responder.Respond(ToHttp(*r));
    } else {
      // The watch ended before any event: an empty, successful stream.
      responder.StartStream(200)->Close();
    }
  });
}

}  // namespace mf::k8s::testing
