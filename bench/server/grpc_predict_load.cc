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
//   --client=nghttp2 (default): gRPC framing written by hand on nghttp2's client session, as
//     cheap per call as wrk is per REST request. Every answer is checked as a gRPC client
//     would: HTTP 200, grpc-status 0, and one length-prefixed PredictResponse that parses and
//     has outputs; anything else counts as an error.
//   --client=grpcpp: grpc++'s generated stub (async API, one completion queue), a real gRPC
//     client whose own per-call cost is larger than the server's on a 2-core machine.
// Prints one line: "rps=<r> p50_ms=<x> p99_ms=<y> errors=<n>".
// With model "@health" it calls grpc.health.v1.Health/Check instead: the same client and
// transport with no model work, i.e. this client's and the transport's own ceiling.
//
//   grpc_predict_load [--client=nghttp2|grpcpp] [--connections=K] <host:port> <clients> <seconds>
//                     [model (digits) | @health] [input (images)]
//                     [shape (1,64), e.g. 1,3,224,224 for an image model]
#include <grpcpp/grpcpp.h>
#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <array>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "grpc/health/v1/health.grpc.pb.h"
#include "tensorflow_serving/apis/prediction_service.grpc.pb.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace tfs = tensorflow::serving;
namespace asio = boost::asio;
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

// What a run measured: one latency per good answer, and the failures.
struct Result {
  std::vector<double> latencies_ms;
  long errors = 0;
  double elapsed_s = 0;
};

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

// ---- nghttp2 client --------------------------------------------------------------------------

// The run every connection shares: what to send, when to stop, what was measured.
struct H2Run {
  const Options* options;
  std::string path;
  std::string frame;  // the request message behind its 5-byte gRPC prefix
  Clock::time_point deadline;
  Result* result;
  std::string failure;  // a connection-level error ends the run
};

// One call in flight: its stream's answer as it arrives. Stream user data in nghttp2.
struct H2Call {
  Clock::time_point sent;
  size_t sent_offset = 0;
  int http_status = 0;
  std::string grpc_status;
  std::string body;
};

// One HTTP/2 connection carrying `calls` concurrent calls, as a gRPC channel multiplexes its
// callers' calls; each finished call is re-sent on the same connection.
class H2Connection {
 public:
  H2Connection(asio::io_context& io, H2Run* run, int calls) : socket_(io), run_(run), calls_(static_cast<size_t>(calls)) {
    nghttp2_session_callbacks* callbacks = nullptr;
    nghttp2_session_callbacks_new(&callbacks);
    nghttp2_session_callbacks_set_on_header_callback(callbacks, &OnHeader);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, &OnData);
    nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, &OnStreamClose);
    nghttp2_session_client_new(&session_, callbacks, this);
    nghttp2_session_callbacks_del(callbacks);
    // Big windows, as grpc++ negotiates, so a large answer is not throttled by flow control.
    const nghttp2_settings_entry settings[] = {{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 16u << 20},
                                              {NGHTTP2_SETTINGS_ENABLE_PUSH, 0}};
    nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, 2);
    nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, 64 << 20);
  }
  ~H2Connection() { nghttp2_session_del(session_); }

  bool Connect(const std::string& host, const std::string& port) {
    boost::system::error_code ec;
    asio::ip::tcp::resolver resolver(socket_.get_executor());
    auto endpoints = resolver.resolve(host, port, ec);
    if (!ec) asio::connect(socket_, endpoints, ec);
    if (!ec) socket_.set_option(asio::ip::tcp::no_delay(true), ec);
    if (ec) run_->failure = "cannot connect to " + host + ":" + port + ": " + ec.message();
    return !ec;
  }

  void Start() {
    Read();
    for (H2Call& call : calls_) Send(call);
    Flush();
  }

 private:
  static H2Connection* Self(void* user_data) { return static_cast<H2Connection*>(user_data); }
  H2Call* CallOf(int32_t stream_id) {
    return static_cast<H2Call*>(nghttp2_session_get_stream_user_data(session_, stream_id));
  }

  // Queues the call's request; Flush() writes it.
  void Send(H2Call& call) {
    const std::string& authority = run_->options->target;
    auto nv = [](const std::string& name, const std::string& value) {
      return nghttp2_nv{reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
                        reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(), value.size(),
                        NGHTTP2_NV_FLAG_NONE};
    };
    static const std::string kMethod = ":method", kPost = "POST", kScheme = ":scheme", kHttp = "http",
                             kPath = ":path", kAuthority = ":authority", kType = "content-type",
                             kGrpc = "application/grpc", kTe = "te", kTrailers = "trailers", kTimeout = "grpc-timeout",
                             k30s = "30S";
    const nghttp2_nv headers[] = {nv(kMethod, kPost),         nv(kScheme, kHttp), nv(kPath, run_->path),
                                  nv(kAuthority, authority),  nv(kType, kGrpc),   nv(kTe, kTrailers),
                                  nv(kTimeout, k30s)};
    nghttp2_data_provider provider;
    provider.source.ptr = &call;
    provider.read_callback = &ReadRequest;
    call.sent_offset = 0;
    call.http_status = 0;
    call.grpc_status.clear();
    call.body.clear();
    call.sent = Clock::now();
    if (nghttp2_submit_request(session_, nullptr, headers, std::size(headers), &provider, &call) < 0) {
      Fail("cannot submit a request");
      return;
    }
    ++active_;
  }

  static ssize_t ReadRequest(nghttp2_session*, int32_t, uint8_t* buf, size_t length, uint32_t* flags,
                             nghttp2_data_source* source, void* user_data) {
    auto* call = static_cast<H2Call*>(source->ptr);
    const std::string& frame = Self(user_data)->run_->frame;
    const size_t n = std::min(length, frame.size() - call->sent_offset);
    std::memcpy(buf, frame.data() + call->sent_offset, n);
    call->sent_offset += n;
    if (call->sent_offset == frame.size()) *flags |= NGHTTP2_DATA_FLAG_EOF;
    return static_cast<ssize_t>(n);
  }

  static int OnHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name, size_t namelen,
                      const uint8_t* value, size_t valuelen, uint8_t, void* user_data) {
    H2Call* call = Self(user_data)->CallOf(frame->hd.stream_id);
    if (call == nullptr) return 0;
    std::string_view key(reinterpret_cast<const char*>(name), namelen);
    std::string_view val(reinterpret_cast<const char*>(value), valuelen);
    // grpc-status comes in the trailers, or in the headers of a trailers-only answer.
    if (key == ":status") call->http_status = std::atoi(std::string(val).c_str());
    if (key == "grpc-status") call->grpc_status = std::string(val);
    return 0;
  }

  static int OnData(nghttp2_session*, uint8_t, int32_t stream_id, const uint8_t* data, size_t len, void* user_data) {
    if (H2Call* call = Self(user_data)->CallOf(stream_id)) call->body.append(reinterpret_cast<const char*>(data), len);
    return 0;
  }

  static int OnStreamClose(nghttp2_session*, int32_t stream_id, uint32_t error_code, void* user_data) {
    H2Connection* self = Self(user_data);
    H2Call* call = self->CallOf(stream_id);
    if (call == nullptr) return 0;
    --self->active_;
    self->Completed(*call, error_code == NGHTTP2_NO_ERROR && self->AnswerIsGood(*call));
    return 0;
  }

  // What a gRPC client accepts: HTTP 200, grpc-status 0 and exactly one message that parses.
  bool AnswerIsGood(const H2Call& call) const {
    const std::string& body = call.body;
    if (call.http_status != 200 || call.grpc_status != "0" || body.size() < 5 || body[0] != 0) return false;
    const size_t length = (size_t{static_cast<uint8_t>(body[1])} << 24) |
                          (size_t{static_cast<uint8_t>(body[2])} << 16) |
                          (size_t{static_cast<uint8_t>(body[3])} << 8) | static_cast<uint8_t>(body[4]);
    if (length != body.size() - 5) return false;
    if (run_->options->health_only) {
      HealthCheckResponse response;
      return response.ParseFromArray(body.data() + 5, static_cast<int>(length));
    }
    tfs::PredictResponse response;
    return response.ParseFromArray(body.data() + 5, static_cast<int>(length)) && !response.outputs().empty();
  }

  void Completed(H2Call& call, bool good) {
    const Clock::time_point now = Clock::now();
    if (good) {
      run_->result->latencies_ms.push_back(std::chrono::duration<double, std::milli>(now - call.sent).count());
    } else {
      ++run_->result->errors;
    }
    // Re-sent after nghttp2 returns: no new request from inside its callback.
    if (now < run_->deadline && run_->failure.empty()) resend_.push_back(&call);
  }

  void Read() {
    socket_.async_read_some(asio::buffer(read_buffer_), [this](boost::system::error_code ec, size_t n) {
      if (ec) {
        if (!done_) Fail("connection lost: " + ec.message());
        return;
      }
      if (nghttp2_session_mem_recv(session_, reinterpret_cast<const uint8_t*>(read_buffer_.data()), n) < 0) {
        Fail("HTTP/2 protocol error from the server");
        return;
      }
      for (H2Call* call : resend_) Send(*call);
      resend_.clear();
      Flush();
      if (active_ == 0 && !done_) {  // past the deadline, every call answered
        done_ = true;
        boost::system::error_code ignored;
        socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
        socket_.close(ignored);
      }
      if (done_) return;
      Read();
    });
  }

  void Flush() {
    if (writing_ || done_) return;
    out_.clear();
    for (;;) {
      const uint8_t* data = nullptr;
      ssize_t n = nghttp2_session_mem_send(session_, &data);
      if (n < 0) return Fail("HTTP/2 send error");
      if (n == 0) break;
      out_.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
    }
    if (out_.empty()) return;
    writing_ = true;
    asio::async_write(socket_, asio::buffer(out_), [this](boost::system::error_code ec, size_t) {
      writing_ = false;
      if (ec) {
        if (!done_) Fail("write failed: " + ec.message());
        return;
      }
      Flush();
    });
  }

  void Fail(const std::string& why) {
    if (run_->failure.empty()) run_->failure = why;
    if (!done_) {
      done_ = true;
      boost::system::error_code ignored;
      socket_.close(ignored);
    }
  }

  asio::ip::tcp::socket socket_;
  H2Run* run_;
  nghttp2_session* session_ = nullptr;
  std::vector<H2Call> calls_;  // never resized: streams point into it
  std::vector<H2Call*> resend_;
  size_t active_ = 0;  // calls sent and not yet answered
  std::array<char, 64 * 1024> read_buffer_{};
  std::string out_;
  bool writing_ = false;
  bool done_ = false;
};

bool RunNghttp2(const Options& o, Result* result) {
  const size_t colon = o.target.rfind(':');
  if (colon == std::string::npos) {
    std::fprintf(stderr, "target must be host:port\n");
    return false;
  }
  H2Run run;
  run.options = &o;
  run.result = result;
  run.path = o.health_only ? "/grpc.health.v1.Health/Check" : "/tensorflow.serving.PredictionService/Predict";
  std::string message = o.health_only ? HealthCheckRequest().SerializeAsString() : o.request.SerializeAsString();
  run.frame.push_back('\0');
  for (int shift = 24; shift >= 0; shift -= 8) run.frame.push_back(static_cast<char>((message.size() >> shift) & 0xff));
  run.frame += message;

  // Warm-up: every connection answers one call before the clock starts.
  const std::string host = o.target.substr(0, colon), port = o.target.substr(colon + 1);
  const int connections = o.connections;
  {
    asio::io_context io;
    std::vector<std::unique_ptr<H2Connection>> warm;
    Result ignored;
    H2Run warm_run = run;
    warm_run.result = &ignored;
    warm_run.deadline = Clock::now();  // one call each
    for (int i = 0; i < connections; ++i) {
      warm.push_back(std::make_unique<H2Connection>(io, &warm_run, 1));
      if (!warm.back()->Connect(host, port)) break;
      warm.back()->Start();
    }
    io.run_for(std::chrono::seconds(10));
    if (!warm_run.failure.empty() || ignored.errors > 0 ||
        ignored.latencies_ms.size() != static_cast<size_t>(connections)) {
      std::fprintf(stderr, "warm-up calls failed: %s (%ld errors)\n", warm_run.failure.c_str(), ignored.errors);
      return false;
    }
  }
  asio::io_context io;
  std::vector<std::unique_ptr<H2Connection>> all;
  for (int i = 0; i < connections; ++i) {
    const int calls = o.clients / connections + (i < o.clients % connections ? 1 : 0);
    all.push_back(std::make_unique<H2Connection>(io, &run, calls));
    if (!all.back()->Connect(host, port)) {
      std::fprintf(stderr, "%s\n", run.failure.c_str());
      return false;
    }
  }
  const Clock::time_point begin = Clock::now();
  run.deadline = begin + std::chrono::seconds(o.seconds);
  for (auto& connection : all) connection->Start();
  io.run_for(std::chrono::seconds(o.seconds + 30));
  result->elapsed_s = std::chrono::duration<double>(Clock::now() - begin).count();
  if (!run.failure.empty()) {
    std::fprintf(stderr, "%s\n", run.failure.c_str());
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
      if (client != "nghttp2" && client != "grpcpp") {
        std::fprintf(stderr, "--client must be nghttp2 or grpcpp\n");
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
    std::fprintf(stderr, "usage: %s [--client=nghttp2|grpcpp] [--connections=K] <host:port> <clients> <seconds> [model] [input] [shape]\n",
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
  if (!(use_grpcpp ? RunGrpcpp(o, &result) : RunNghttp2(o, &result))) return 1;
  std::sort(result.latencies_ms.begin(), result.latencies_ms.end());
  std::printf("rps=%.1f p50_ms=%.3f p99_ms=%.3f errors=%ld\n",
              static_cast<double>(result.latencies_ms.size()) / result.elapsed_s,
              Percentile(result.latencies_ms, 0.50), Percentile(result.latencies_ms, 0.99), result.errors);
  return result.errors == 0 ? 0 : 1;
}
