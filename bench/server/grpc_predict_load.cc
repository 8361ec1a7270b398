// Closed-loop gRPC load generator for TF Serving's PredictionService/Predict, built like wrk:
// one event-loop thread (grpc++ async API, one completion queue) keeps N calls in flight over N
// channels (one HTTP/2 connection each, as wrk gives each client its own TCP connection); each
// call is re-sent the moment its answer arrives. One thread, not N blocking threads, so that on
// a small machine the client takes as little CPU from the server as wrk does for REST.
// Prints one line: "rps=<r> p50_ms=<x> p99_ms=<y> errors=<n>".
// With model "@health" it calls grpc.health.v1.Health/Check instead: the same client and
// transport with no model work, i.e. this client's and gRPC's own ceiling.
//
//   grpc_predict_load <host:port> <clients> <seconds> [model (digits) | @health] [input (images)]
//                     [shape (1,64), e.g. 1,3,224,224 for an image model]
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "grpc/health/v1/health.grpc.pb.h"
#include "tensorflow_serving/apis/prediction_service.grpc.pb.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace tfs = tensorflow::serving;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

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

// One client: a channel and the call it has in flight. The client itself is the CQ tag.
struct Client {
  std::unique_ptr<tfs::PredictionService::Stub> predict;
  std::unique_ptr<grpc::health::v1::Health::Stub> health;
  std::unique_ptr<grpc::ClientContext> context;
  std::unique_ptr<grpc::ClientAsyncResponseReader<tfs::PredictResponse>> predict_call;
  std::unique_ptr<grpc::ClientAsyncResponseReader<HealthCheckResponse>> health_call;
  tfs::PredictResponse predict_response;
  HealthCheckResponse health_response;
  grpc::Status status;
  Clock::time_point sent;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s <host:port> <clients> <seconds> [model] [input] [shape]\n", argv[0]);
    return 2;
  }
  const std::string target = argv[1];
  const int clients = std::atoi(argv[2]);
  const int seconds = std::atoi(argv[3]);
  const std::string model = argc > 4 ? argv[4] : "digits";
  const std::string input = argc > 5 ? argv[5] : "images";
  std::vector<int64_t> shape{1, 64};
  if (argc > 6) {
    shape.clear();
    for (const char* p = argv[6]; *p;) {
      char* end = nullptr;
      shape.push_back(std::strtoll(p, &end, 10));
      if (end == p || shape.back() < 1) {
        std::fprintf(stderr, "shape must be positive dims separated by commas, e.g. 1,3,224,224\n");
        return 2;
      }
      p = *end == ',' ? end + 1 : end;
    }
  }
  if (clients < 1 || seconds < 1) {
    std::fprintf(stderr, "clients and seconds must be >= 1\n");
    return 2;
  }
  const tfs::PredictRequest request = MakeRequest(model, input, shape);
  const HealthCheckRequest health_request;
  const bool health_only = model == "@health";

  std::vector<Client> all(static_cast<size_t>(clients));
  for (int i = 0; i < clients; ++i) {
    grpc::ChannelArguments args;
    // A distinct argument per channel keeps gRPC from sharing one connection among them.
    args.SetInt("mf.bench.channel", i);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    auto channel = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
    Client& client = all[static_cast<size_t>(i)];
    client.predict = tfs::PredictionService::NewStub(channel);
    client.health = grpc::health::v1::Health::NewStub(channel);
    // Warm-up call: connect before the clock starts, and fail early on a wrong target.
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    const grpc::Status status = health_only ? client.health->Check(&context, health_request, &client.health_response)
                                            : client.predict->Predict(&context, request, &client.predict_response);
    if (!status.ok()) {
      std::fprintf(stderr, "warm-up call failed: %s\n", status.error_message().c_str());
      return 1;
    }
  }

  grpc::CompletionQueue queue;
  auto send = [&](Client& client) {
    client.context = std::make_unique<grpc::ClientContext>();
    client.context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    client.sent = Clock::now();
    if (health_only) {
      client.health_call = client.health->AsyncCheck(client.context.get(), health_request, &queue);
      client.health_call->Finish(&client.health_response, &client.status, &client);
    } else {
      client.predict_response.Clear();
      client.predict_call = client.predict->AsyncPredict(client.context.get(), request, &queue);
      client.predict_call->Finish(&client.predict_response, &client.status, &client);
    }
  };

  long errors = 0;
  std::vector<double> latencies;
  latencies.reserve(1 << 20);
  const Clock::time_point begin = Clock::now();
  const Clock::time_point deadline = begin + std::chrono::seconds(seconds);
  for (Client& client : all) send(client);
  int in_flight = clients;
  void* tag = nullptr;
  bool ok = false;
  while (in_flight > 0 && queue.Next(&tag, &ok)) {
    Client& client = *static_cast<Client*>(tag);
    const Clock::time_point now = Clock::now();
    if (!ok || !client.status.ok() || (!health_only && client.predict_response.outputs().empty())) {
      ++errors;
    } else {
      latencies.push_back(std::chrono::duration<double, std::milli>(now - client.sent).count());
    }
    if (now < deadline) {
      send(client);
    } else {
      --in_flight;
    }
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - begin).count();
  queue.Shutdown();
  while (queue.Next(&tag, &ok)) {
  }

  std::sort(latencies.begin(), latencies.end());
  std::printf("rps=%.1f p50_ms=%.3f p99_ms=%.3f errors=%ld\n", static_cast<double>(latencies.size()) / elapsed,
              Percentile(latencies, 0.50), Percentile(latencies, 0.99), errors);
  return errors == 0 ? 0 : 1;
}
