// A minimal server on mf::http for benchmarks and end-to-end tests with real clients:
//   GET  /           a fixed small body ("hello, world\n"), the figure run.sh compares with nginx
//   POST /echo       the (decoded) request body back
//   GET  /stream?n=K K chunks "chunk i\n", 10 ms apart, then the end of the stream
// Prints "listening on PORT" once ready; SIGTERM/SIGINT drain it.
#include <iostream>
#include <thread>

#include "common/flags.h"
#include "common/logging.h"
#include "http/server.h"

int main(int argc, char** argv) {
  mf::FlagSet flags("http_bench_server", "Serves a fixed response for HTTP benchmarks.");
  int port = 0;
  int threads = 1;
  int64_t max_body = 64 << 20;
  std::string log_level = "info";
  bool metrics = false;
  flags.Add("port", &port, "TCP port on 127.0.0.1 (0: pick a free one)");
  flags.Add("threads", &threads, "io threads");
  flags.Add("max_body_bytes", &max_body, "request body limit");
  flags.Add("log_level", &log_level, "debug | info | warning | error");
  flags.Add("metrics", &metrics, "count requests in http_requests_total / http_request_duration_seconds");
  if (auto s = flags.Parse(argc, argv); !s.ok()) {
    std::cerr << s.message() << "\n" << flags.Usage();
    return 2;
  }
  mf::log::Level level;
  if (!mf::log::ParseLevel(log_level, &level)) {
    std::cerr << "unknown --log_level '" << log_level << "'\n";
    return 2;
  }
  mf::log::SetLevel(level);

  mf::http::Router router;
  router.Add("GET", "/",
             mf::http::Sync([](const mf::http::Request&) { return mf::http::Response::Text(200, "hello, world\n"); }));
  router.Add("POST", "/echo", mf::http::Sync([](const mf::http::Request& r) {
               return mf::http::Response::Text(200, r.body, "application/octet-stream");
             }));
  router.Add("GET", "/stream", [](mf::http::Request request, mf::http::Responder responder) {
    int n = 5;
    if (auto q = request.query(); q.starts_with("n=")) n = std::atoi(std::string(q.substr(2)).c_str());
    auto stream = responder.StartStream(200);
    std::thread([stream, n] {
      for (int i = 0; i < n && !stream->closed(); ++i) {
        stream->Write("chunk " + std::to_string(i) + "\n");
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      stream->Close();
    }).detach();
  });
  router.Add("GET", "/metrics", mf::http::MetricsHandler());

  mf::http::Server server({.address = "127.0.0.1",
                           .port = static_cast<uint16_t>(port),
                           .io_threads = threads,
                           .max_body_bytes = static_cast<size_t>(max_body),
                           .metrics_label = metrics ? "bench" : ""},
                          router.AsHandler());
  if (auto s = server.Start(); !s.ok()) {
    std::cerr << s.ToString() << "\n";
    return 1;
  }
  std::cout << "listening on " << server.port() << std::endl;
  mf::http::WaitForTerminationSignal();
  return server.Drain(std::chrono::seconds(5)) ? 0 : 1;
}
