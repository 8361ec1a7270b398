// Arbitrary bytes as an HTTP/2 client's connection input (after the client preface, which is
// prepended) into the server's protocol engine (src/http2/h2_server_session.cc), with requests routed
// through the gRPC layer (src/http2/grpc_router.cc) whose handlers answer in every shape:
// unary, streamed in parts after more input arrived, reset, or never. Must not crash or leak;
// what the server writes back is produced and dropped.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "http2/grpc_router.h"
#include "http2/grpc_wire.h"
#include "http2/h2_server_session.h"

namespace {

using mf::http2::GrpcCall;
using mf::http2::ResponsePart;
using mf::http2::Session;

// A ResponseStream applied straight to the session (the fuzzer has no io thread).
class DirectStream final : public mf::http2::ResponseStream {
 public:
  DirectStream(Session* session, int32_t id) : session_(session), id_(id) {}
  void Send(ResponsePart part) override {
    if (!closed_) session_->Send(id_, std::move(part));
  }
  void Reset(uint32_t error_code) override {
    if (!closed_) session_->Reset(id_, error_code);
  }
  bool closed() const override { return closed_; }
  void OnClose(std::function<void()> callback) override {
    if (closed_) return callback();
    on_close_.push_back(std::move(callback));
  }
  void MarkClosed() {
    closed_ = true;
    auto callbacks = std::move(on_close_);
    for (auto& callback : callbacks) callback();
  }

 private:
  Session* session_;
  int32_t id_;
  bool closed_ = false;
  std::vector<std::function<void()>> on_close_;
};

class Delegate final : public Session::Delegate {
 public:
  explicit Delegate(mf::http2::Handler handler) : handler_(std::move(handler)) {}
  void Attach(Session* session) { session_ = session; }
  void OnRequest(int32_t id, mf::http2::Request request) override {
    auto stream = std::make_shared<DirectStream>(session_, id);
    streams_.push_back({id, stream});
    handler_(std::move(request), stream);
  }
  void OnStreamClosed(int32_t id) override {
    for (auto& [stream_id, weak] : streams_) {
      if (stream_id != id) continue;
      if (auto stream = weak.lock()) stream->MarkClosed();
    }
  }

 private:
  mf::http2::Handler handler_;
  Session* session_ = nullptr;
  std::vector<std::pair<int32_t, std::weak_ptr<DirectStream>>> streams_;
};

std::string EchoFrame(std::string_view message) {
  std::string frame = mf::http2::ReserveGrpcFrame();
  frame.append(message);
  (void)mf::http2::SealGrpcFrame(&frame);
  return frame;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::shared_ptr<GrpcCall>> streaming;  // answered after the next chunk of input
  mf::http2::GrpcRouter router(4096);
  router.Add("/t.S/Unary", [](std::shared_ptr<GrpcCall> call) { call->Reply(EchoFrame(call->request_message())); })
      .Add("/t.S/Error", [](std::shared_ptr<GrpcCall> call) { call->Finish(mf::InvalidArgument("bad \xff %")); })
      .Add("/t.S/Stream",
           [&](std::shared_ptr<GrpcCall> call) {
             call->Write(EchoFrame("first"));
             streaming.push_back(std::move(call));
           })
      .Add("/t.S/Drop", [](std::shared_ptr<GrpcCall>) {});
  mf::http2::SessionOptions options;
  options.max_concurrent_streams = 16;
  options.max_request_body_bytes = 4096 + mf::http2::kGrpcPrefixBytes;
  options.max_header_list_bytes = 2048;
  Delegate delegate(router.AsHandler());
  Session session(options, "127.0.0.1:1", &delegate);
  delegate.Attach(&session);
  std::string out;
  (void)session.Produce(&out, 1 << 20);
  static constexpr char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  if (!session.Receive(reinterpret_cast<const uint8_t*>(kPreface), sizeof(kPreface) - 1).ok()) return 0;
  // Input arrives in chunks, as reads would deliver it; between chunks the server writes and
  // the streaming calls move on (another message, then the end).
  size_t at = 0;
  while (at < size && session.alive()) {
    size_t chunk = std::min<size_t>(size - at, 1 + (data[at] % 97));
    if (!session.Receive(data + at, chunk).ok()) break;
    at += chunk;
    out.clear();
    (void)session.Produce(&out, 1 << 20);
    std::vector<std::shared_ptr<GrpcCall>> calls = std::move(streaming);
    streaming.clear();
    for (auto& call : calls) {
      if (call->Write(EchoFrame("more"))) call->Finish(mf::Status::Ok());
    }
  }
  out.clear();
  (void)session.Produce(&out, 1 << 20);
  session.Goaway();
  out.clear();
  (void)session.Produce(&out, 1 << 20);
  return 0;
}
