// Closed-loop gRPC load generator for TF Serving's PredictionService/Predict, built like wrk:
// one event-loop thread keeps N calls in flight (N clients, each re-sending its call the moment
// the answer arrives). One thread, not N blocking threads, so that on a small machine the client
// takes as little CPU from the server as wrk does for REST.
//
// Where the calls travel, --connections=K:
//   default (K = N): each client has its own HTTP/2 connection, as wrk gives each REST client
//     its own TCP connection;
//   K < N: the N calls are multiplexed over K connections, as N threads sharing one gRPC
//     channel (or a pool of K) send them, and as ghz does by default (one connection).
//
// Two clients speak the same protocol:
//   --client=lean (default): bench/server/lean_grpc_client.h, HTTP/2 on src/http2's frames and
//     HPACK with one epoll loop, as cheap per call as wrk is per REST request (the nghttp2
//     session client it replaced cost ~1.3x wrk's CPU per call). Every answer is checked as a
//     gRPC client would: HTTP 200, grpc-status 0, and one length-prefixed PredictResponse that
//     parses and has outputs; anything else counts as an error. h2load (server_vs_nginx.py)
//     is the independent HTTP/2 peer next to it.
//   --client=grpcpp: grpc++'s generated stub (async API, one completion queue), a real gRPC
//     client whose own per-call cost is larger than the server's on a 2-core machine.
// Prints one line: "rps=<r> p50_ms=<x> p99_ms=<y> errors=<n>".
// With model "@health" it calls grpc.health.v1.Health/Check instead: the same client and
// transport with no model work, i.e. this client's and the transport's own ceiling.
//
//   grpc_predict_load [--client=lean|grpcpp] [--connections=K] <host:port> <clients> <seconds>
//                     [model (digits) | @health] [input (images)]
//                     [shape (1,64), e.g. 1,3,224,224 for an image model]
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench/server/lean_grpc_client.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "tensorflow_serving/apis/prediction_service.grpc.pb.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace tfs = tensorflow::serving;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

struct Options {
  std::string target;
  int clients = 1;
  int connections = 0;  // the clients' calls spread over this many connections; 0: one each
  int seconds = 1;
  bool health_only = false;
  tfs::PredictRequest request;
};

using Result = mf::bench::LoadResult;

tfs::PredictRequest MakeRequest(const std::string& model, const std::string& input, const std::vector<int64_t>& shape) {
  tfs::PredictRequest request;
  request.mutable_model_spec()->set_name(model);
  tensorflow::TensorProto& tensor = (*request.mutable_inputs())[input];
  tensor.set_dtype(tensorflow::DT_FLOAT);
  int64_t elements = 1;
  for (int64_t d : shape) {
    tensor.mutable_tensor_shape()->add_dim()->set_size(d);
    elements *= d;
  }
  // For the digits row, the same values the REST benchmark posts, (3 * i) % 17, as
  // tensor_content (little-endian floats), the form tf.make_tensor_proto and the Python client send.
  std::string content;
  for (int64_t i = 0; i < elements; ++i) {
    const float value = static_cast<float>((3 * i) % 17);
    content.append(reinterpret_cast<const char*>(&value), sizeof(value));
  }
  tensor.set_tensor_content(std::move(content));
  return request;
}

double Percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0.0;
  const size_t index = std::min(sorted.size() - 1, static_cast<size_t>(q * static_cast<double>(sorted.size())));
  return sorted[index];
}

// ---- grpc++ client ---------------------------------------------------------------------------

// One client: the stubs of its channel and the call it has in flight. The client is the CQ tag.
struct GrpcppClient {
  tfs::PredictionService::Stub* predict = nullptr;
  grpc::health::v1::Health::Stub* health = nullptr;
  std::unique_ptr<grpc::ClientContext> context;
  std::unique_ptr<grpc::ClientAsyncResponseReader<tfs::PredictResponse>> predict_call;
  std::unique_ptr<grpc::ClientAsyncResponseReader<HealthCheckResponse>> health_call;
  tfs::PredictResponse predict_response;
  HealthCheckResponse health_response;
  grpc::Status status;
  Clock::time_point sent;
};

// One channel (one HTTP/2 connection) and the stubs its clients share.
struct GrpcppChannel {
  std::unique_ptr<tfs::PredictionService::Stub> predict;
  std::unique_ptr<grpc::health::v1::Health::Stub> health;
};

bool RunGrpcpp(const Options& o, Result* result) {
  const HealthCheckRequest health_request;
  std::vector<GrpcppChannel> channels(static_cast<size_t>(o.connections));
  for (int i = 0; i < o.connections; ++i) {
    grpc::ChannelArguments args;
    // A distinct argument per channel keeps gRPC from sharing one connection among them.
    args.SetInt("mf.bench.channel", i);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    auto channel = grpc::CreateCustomChannel(o.target, grpc::InsecureChannelCredentials(), args);
    GrpcppChannel& c = channels[static_cast<size_t>(i)];
    c.predict = tfs::PredictionService::NewStub(channel);
    c.health = grpc::health::v1::Health::NewStub(channel);
    // Warm-up call: connect before the clock starts, and fail early on a wrong target.
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    tfs::PredictResponse predict_response;
    HealthCheckResponse health_response;
    const grpc::Status status = o.health_only ? c.health->Check(&context, health_request, &health_response)
                                              : c.predict->Predict(&context, o.request, &predict_response);
    if (!status.ok()) {
      std::fprintf(stderr, "warm-up call failed: %s\n", status.error_message().c_str());
      return false;
    }
  }
  std::vector<GrpcppClient> all(static_cast<size_t>(o.clients));
  for (size_t i = 0; i < all.size(); ++i) {
    all[i].predict = channels[i % channels.size()].predict.get();
    all[i].health = channels[i % channels.size()].health.get();
  }

  grpc::CompletionQueue queue;
  auto send = [&](GrpcppClient& client) {
    client.context = std::make_unique<grpc::ClientContext>();
    client.context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    client.sent = Clock::now();
    if (o.health_only) {
      client.health_call = client.health->AsyncCheck(client.context.get(), health_request, &queue);
      client.health_call->Finish(&client.health_response, &client.status, &client);
    } else {
      client.predict_response.Clear();
      client.predict_call = client.predict->AsyncPredict(client.context.get(), o.request, &queue);
      client.predict_call->Finish(&client.predict_response, &client.status, &client);
    }
  };

  const Clock::time_point begin = Clock::now();
  const Clock::time_point deadline = begin + std::chrono::seconds(o.seconds);
  for (GrpcppClient& client : all) send(client);
  int in_flight = o.clients;
  void* tag = nullptr;
  bool ok = false;
  while (in_flight > 0 && queue.Next(&tag, &ok)) {
    GrpcppClient& client = *static_cast<GrpcppClient*>(tag);
    const Clock::time_point now = Clock::now();
    if (!ok || !client.status.ok() || (!o.health_only && client.predict_response.outputs().empty())) {
      ++result->errors;
    } else {
      result->latencies_ms.push_back(std::chrono::duration<double, std::milli>(now - client.sent).count());
    }
    if (now < deadline) {
      send(client);
    } else {
      --in_flight;
    }
  }
  result->elapsed_s = std::chrono::duration<double>(Clock::now() - begin).count();
  queue.Shutdown();
  while (queue.Next(&tag, &ok)) {
  }
  return true;
}

// ---- lean client (src/http2's frames and HPACK) ------------------------------------------------

bool RunLean(const Options& o, Result* result) {
  const size_t colon = o.target.rfind(':');
  if (colon == std::string::npos) {
    std::fprintf(stderr, "target must be host:port\n");
    return false;
  }
  mf::bench::GrpcLoad load;
  load.host = o.target.substr(0, colon);
  load.port = o.target.substr(colon + 1);
  load.path = o.health_only ? "/grpc.health.v1.Health/Check" : "/tensorflow.serving.PredictionService/Predict";
  load.message = o.health_only ? HealthCheckRequest().SerializeAsString() : o.request.SerializeAsString();
  load.clients = o.clients;
  load.connections = o.connections;
  load.seconds = o.seconds;
  load.check = [health = o.health_only](std::string_view message) {
    if (health) return HealthCheckResponse().ParseFromArray(message.data(), static_cast<int>(message.size()));
    tfs::PredictResponse response;
    return response.ParseFromArray(message.data(), static_cast<int>(message.size())) && !response.outputs().empty();
  };
  std::string failure;
  if (!mf::bench::RunLeanGrpc(load, result, &failure)) {
    std::fprintf(stderr, "%s\n", failure.c_str());
    if (result->elapsed_s == 0) return false;  // never got going
    ++result->errors;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  bool use_grpcpp = false;
  int first = 1;
  int connections = 0;
  for (; first < argc && std::strncmp(argv[first], "--", 2) == 0; ++first) {
    const std::string flag = argv[first];
    if (flag.rfind("--client=", 0) == 0) {
      const std::string client = flag.substr(9);
      if (client != "lean" && client != "grpcpp") {
        std::fprintf(stderr, "--client must be lean or grpcpp\n");
        return 2;
      }
      use_grpcpp = client == "grpcpp";
    } else if (flag.rfind("--connections=", 0) == 0) {
      connections = std::atoi(flag.c_str() + 14);
      if (connections < 1) {
        std::fprintf(stderr, "--connections must be >= 1\n");
        return 2;
      }
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (argc - first < 3) {
    std::fprintf(
        stderr,
        "usage: %s [--client=lean|grpcpp] [--connections=K] <host:port> <clients> <seconds> [model] [input] [shape]\n",
        argv[0]);
    return 2;
  }
  Options o;
  o.target = argv[first];
  o.clients = std::atoi(argv[first + 1]);
  o.seconds = std::atoi(argv[first + 2]);
  const std::string model = argc > first + 3 ? argv[first + 3] : "digits";
  const std::string input = argc > first + 4 ? argv[first + 4] : "images";
  std::vector<int64_t> shape{1, 64};
  if (argc > first + 5) {
    shape.clear();
    for (const char* p = argv[first + 5]; *p;) {
      char* end = nullptr;
      shape.push_back(std::strtoll(p, &end, 10));
      if (end == p || shape.back() < 1) {
        std::fprintf(stderr, "shape must be positive dims separated by commas, e.g. 1,3,224,224\n");
        return 2;
      }
      p = *end == ',' ? end + 1 : end;
    }
  }
  if (o.clients < 1 || o.seconds < 1) {
    std::fprintf(stderr, "clients and seconds must be >= 1\n");
    return 2;
  }
  o.connections = connections == 0 ? o.clients : std::min(connections, o.clients);
  o.health_only = model == "@health";
  o.request = MakeRequest(model, input, shape);

  Result result;
  result.latencies_ms.reserve(1 << 20);
  if (!(use_grpcpp ? RunGrpcpp(o, &result) : RunLean(o, &result))) return 1;
  std::sort(result.latencies_ms.begin(), result.latencies_ms.end());
  std::printf("rps=%.1f p50_ms=%.3f p99_ms=%.3f errors=%ld\n",
              static_cast<double>(result.latencies_ms.size()) / result.elapsed_s, Percentile(result.latencies_ms, 0.50),
              Percentile(result.latencies_ms, 0.99), result.errors);
  return result.errors == 0 ? 0 : 1;
}
