// A minimal gRPC (h2c) backend for bench/router/run.sh: every unary call, whatever its method
// and message, is answered with one fixed 32-byte message and grpc-status 0, so a load generator
// measures the transport and whatever proxies it, not a model. Prints "listening on PORT".
#include <iostream>
#include <string>

#include "common/flags.h"
#include "common/logging.h"
#include "http/server.h"
#include "http2/grpc_wire.h"
#include "http2/server.h"

int main(int argc, char** argv) {
  mf::FlagSet flags("grpc_bench_server", "Answers every gRPC call with a fixed message, for proxy benchmarks.");
  int port = 0;
  int threads = 1;
  flags.Add("port", &port, "TCP port on 127.0.0.1 (0: pick a free one)");
  flags.Add("threads", &threads, "io threads");
  if (auto s = flags.Parse(argc, argv); !s.ok()) {
    std::cerr << s.message() << "\n" << flags.Usage();
    return 2;
  }
  mf::log::SetLevel(mf::log::Level::kWarning);

  std::string reply = mf::http2::ReserveGrpcFrame() + std::string(32, 'x');
  if (auto s = mf::http2::SealGrpcFrame(&reply); !s.ok()) {
    std::cerr << s.message() << "\n";
    return 1;
  }
  mf::http2::Server server({.address = "127.0.0.1", .port = static_cast<uint16_t>(port), .io_threads = threads},
                           [&reply](mf::http2::Request, std::shared_ptr<mf::http2::ResponseStream> stream) {
                             stream->Send({.status = 200,
                                           .headers = {{"content-type", "application/grpc"}},
                                           .data = reply,
                                           .end = true,
                                           .trailers = {{"grpc-status", "0"}}});
                           });
  if (auto s = server.Start(); !s.ok()) {
    std::cerr << s.message() << "\n";
    return 1;
  }
  std::cout << "listening on " << server.port() << std::endl;
  mf::http::WaitForTerminationSignal();
  server.Drain(std::chrono::seconds(2));
  return 0;
}
