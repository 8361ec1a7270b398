// A closed-loop load client for gRPC unary calls, built like wrk: one epoll thread, N calls in
// flight spread over K HTTP/2 connections, each call re-sent the moment its answer is complete.
// It speaks HTTP/2 with src/http2's frame helpers and HPACK codec, so a call costs the load
// generator about what a REST request costs wrk (no general-purpose session library per call);
// every answer is still checked as a gRPC client would (HTTP 200, grpc-status 0, one
// length-prefixed message that `check` accepts). Flow control is honoured both ways, so large
// tensors (an image batch) travel too.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace mf::bench {

struct LoadResult {
  std::vector<double> latencies_ms;  // one per good answer
  long errors = 0;
  double elapsed_s = 0;
};

struct GrpcLoad {
  std::string host;
  std::string port;
  std::string path;     // "/package.Service/Method"
  std::string message;  // the serialized request message
  int clients = 1;
  int connections = 1;  // the clients' calls spread over this many connections
  int seconds = 1;
  // Whether an answer's message is what the method should return.
  std::function<bool(std::string_view message)> check;
};

// Runs one warm-up call per connection, then the load for `seconds`. False (with `failure`)
// when the server cannot be reached, breaks the protocol or ends the connections.
bool RunLeanGrpc(const GrpcLoad& load, LoadResult* result, std::string* failure);

}  // namespace mf::bench
