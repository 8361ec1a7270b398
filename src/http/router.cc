// Router, Sync() and MetricsHandler(): the small pieces of server.h that need no I/O.
#include <algorithm>
#include <memory>

#include "http/server.h"
#include "metrics/metrics.h"

namespace mf::http {

Handler Sync(std::function<Response(const Request&)> fn) {
  return [fn = std::move(fn)](Request request, Responder responder) { responder.Respond(fn(request)); };
}

Router& Router::Add(std::string method, std::string path, Handler handler) {
  exact_.push_back({std::move(method), std::move(path), std::move(handler)});
  return *this;
}

Router& Router::AddPrefix(std::string method, std::string prefix, Handler handler) {
  prefix_.push_back({std::move(method), std::move(prefix), std::move(handler)});
  // Longest prefix first, so the first match is the most specific one.
  std::stable_sort(prefix_.begin(), prefix_.end(),
                   [](const Route& a, const Route& b) { return a.path.size() > b.path.size(); });
  return *this;
}

Router& Router::SetCatchAll(Handler handler) {
  catch_all_ = std::move(handler);
  return *this;
}

Handler Router::AsHandler() const {
  struct Table {
    std::vector<Route> exact, prefix;
    Handler catch_all;
  };
  auto table = std::make_shared<const Table>(Table{exact_, prefix_, catch_all_});
  return [table](Request request, Responder responder) {
    std::string_view path = request.path();
    bool path_known = false;
    auto method_matches = [&](const Route& r) { return r.method.empty() || r.method == request.method; };
    for (const Route& r : table->exact) {
      if (r.path != path) continue;
      if (method_matches(r)) return r.handler(std::move(request), std::move(responder));
      path_known = true;
    }
    for (const Route& r : table->prefix) {
      if (!path.starts_with(r.path)) continue;
      if (method_matches(r)) return r.handler(std::move(request), std::move(responder));
      path_known = true;
    }
    if (table->catch_all) return table->catch_all(std::move(request), std::move(responder));
    if (path_known) {
      responder.Respond(
          Response::Json(405, "{\"error\": \"method " + request.method + " is not allowed on this path\"}"));
      return;
    }
    responder.Respond(Response::FromStatus(NotFound("no handler for path " + std::string(path))));
  };
}

Handler MetricsHandler() {
  return Sync([](const Request&) {
    return Response::Text(200, metrics::RenderText(*metrics::DefaultRegistry()), metrics::kTextContentType);
  });
}

}  // namespace mf::http
