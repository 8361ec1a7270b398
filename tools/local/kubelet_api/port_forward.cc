#include "tools/local/kubelet_api/port_forward.h"

#include <array>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <charconv>
#include <deque>
#include <map>
#include <optional>
#include <utility>

#include "common/logging.h"

namespace mf::local {
namespace {

namespace asio = boost::asio;

constexpr size_t kForwardChunk = 32 * 1024;
constexpr size_t kMaxPairs = 256;  // forwarded connections open at once on one client connection
constexpr std::chrono::seconds kConnectTimeout(10);

std::optional<uint16_t> ParsePort(std::string_view text) {
  unsigned value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 1 || value > 65535) return std::nullopt;
  return static_cast<uint16_t>(value);
}

// One forwarded connection: its two streams and the TCP connection to the pod.
struct Pair {
  explicit Pair(const asio::any_io_executor& executor) : timer(executor), socket(executor) {}

  std::string request_id;
  uint32_t data_stream = 0;
  uint32_t error_stream = 0;
  uint16_t port = 0;
  asio::steady_timer timer;  // waiting for the second stream, then for the connect
  asio::ip::tcp::socket socket;
  bool connected = false;
  bool done = false;
  std::array<char, kForwardChunk> buffer;
  std::deque<std::string> to_pod;  // from the client, not yet written to the pod
  bool writing = false;
  bool client_fin = false;
};

class PortForwardSession : public SpdyConnection::Handler, public std::enable_shared_from_this<PortForwardSession> {
 public:
  PortForwardSession(std::shared_ptr<SpdyConnection> connection, std::string ns, std::string pod, std::string uid,
                     KubeletApiHooks hooks, std::chrono::milliseconds stream_creation_timeout)
      : connection_(std::move(connection)),
        ns_(std::move(ns)),
        pod_(std::move(pod)),
        uid_(std::move(uid)),
        hooks_(std::move(hooks)),
        stream_creation_timeout_(stream_creation_timeout) {}

  void OnStreamOpened(uint32_t stream_id, const spdy::Headers& headers, bool /*fin*/) override {
    std::optional<uint16_t> port = ParsePort(spdy::HeaderValue(headers, "port"));
    const std::string_view type = spdy::HeaderValue(headers, "streamtype");
    if (!port || (type != "data" && type != "error")) {
      log::Info("kubelet API: port-forward stream without a valid port or streamType header refused");
      connection_->Refuse(stream_id);
      return;
    }
    const bool is_data = type == "data";
    std::string request_id(spdy::HeaderValue(headers, "requestid"));
    if (request_id.empty()) {
      // Clients from before requestID: a connection's error and data streams are consecutive.
      request_id = std::to_string(is_data ? stream_id - 2 : stream_id);
    }
    std::shared_ptr<Pair> pair = FindOrCreatePair(request_id);
    if (!pair || (is_data ? pair->data_stream : pair->error_stream) != 0) {
      connection_->Refuse(stream_id);
      return;
    }
    (is_data ? pair->data_stream : pair->error_stream) = stream_id;
    if (is_data) pair->port = *port;
    by_stream_[stream_id] = pair;
    connection_->Reply(stream_id);
    if (pair->data_stream != 0 && pair->error_stream != 0) Connect(pair);
  }

  void OnData(uint32_t stream_id, std::string data, bool fin) override {
    auto it = by_stream_.find(stream_id);
    if (it == by_stream_.end() || it->second->data_stream != stream_id) {
      connection_->Consumed(data.size());  // nothing is expected on the error stream
      return;
    }
    const std::shared_ptr<Pair> pair = it->second;
    if (!data.empty()) pair->to_pod.push_back(std::move(data));
    if (fin) pair->client_fin = true;
    WriteToPod(pair);
  }

  void OnStreamReset(uint32_t stream_id) override {
    auto it = by_stream_.find(stream_id);
    if (it == by_stream_.end()) return;
    const std::shared_ptr<Pair> pair = it->second;
    if (pair->error_stream == stream_id) {
      pair->error_stream = 0;
      by_stream_.erase(it);
      return;
    }
    pair->data_stream = 0;
    End(pair);
  }

  void OnConnectionClosed() override {
    for (auto& [id, pair] : pairs_) Close(*pair);
    pairs_.clear();
    by_stream_.clear();
    connection_.reset();
  }

 private:
  std::shared_ptr<Pair> FindOrCreatePair(const std::string& request_id) {
    auto it = pairs_.find(request_id);
    if (it != pairs_.end()) return it->second;
    if (pairs_.size() >= kMaxPairs) return nullptr;
    auto pair = std::make_shared<Pair>(connection_->executor());
    pair->request_id = request_id;
    pairs_[request_id] = pair;
    pair->timer.expires_after(stream_creation_timeout_);
    pair->timer.async_wait([self = shared_from_this(), pair](boost::system::error_code ec) {
      if (ec || pair->done || pair->connected) return;
      self->Fail(pair, pair->data_stream != 0 && pair->error_stream != 0 ? "timed out connecting to the pod"
                                                                         : "timed out waiting for streams");
    });
    return pair;
  }

  void Connect(const std::shared_ptr<Pair>& pair) {
    StatusOr<std::string> ip = hooks_.pod_ip ? hooks_.pod_ip(ns_, pod_) : NotFound("no pod IP lookup configured");
    if (!ip.ok()) {
      Fail(pair, ip.status().message());
      return;
    }
    boost::system::error_code ec;
    const asio::ip::address address = asio::ip::make_address(*ip, ec);
    if (ec) {
      Fail(pair, "the pod's IP address '" + *ip + "' is not an IP address");
      return;
    }
    pair->timer.expires_after(kConnectTimeout);
    pair->timer.async_wait([pair](boost::system::error_code timer_ec) {
      boost::system::error_code ignored;
      if (!timer_ec && !pair->connected) pair->socket.close(ignored);
    });
    const asio::ip::tcp::endpoint endpoint(address, pair->port);
    pair->socket.async_connect(endpoint, [self = shared_from_this(), pair, endpoint](boost::system::error_code ec) {
      if (pair->done || !self->connection_) return;
      pair->timer.cancel();
      if (ec) {
        self->Fail(pair, "failed to connect to " + endpoint.address().to_string() + ":" +
                             std::to_string(endpoint.port()) + ": " + ec.message());
        return;
      }
      pair->connected = true;
      self->ReadFromPod(pair);
      self->WriteToPod(pair);
    });
  }

  void ReadFromPod(const std::shared_ptr<Pair>& pair) {
    pair->socket.async_read_some(asio::buffer(pair->buffer),
                                 [self = shared_from_this(), pair](boost::system::error_code ec, size_t n) {
                                   if (pair->done || !self->connection_) return;
                                   if (ec == asio::error::eof) {
                                     self->End(pair);
                                     return;
                                   }
                                   if (ec) {
                                     self->Fail(pair, "error reading from the pod: " + ec.message());
                                     return;
                                   }
                                   self->connection_->Write(pair->data_stream, std::string(pair->buffer.data(), n),
                                                            false, [self, pair](bool written) {
                                                              if (pair->done) return;
                                                              if (written) {
                                                                self->ReadFromPod(pair);
                                                              } else {
                                                                self->End(pair);
                                                              }
                                                            });
                                 });
  }

  void WriteToPod(const std::shared_ptr<Pair>& pair) {
    if (!pair->connected || pair->writing || pair->done) return;
    if (pair->to_pod.empty()) {
      if (pair->client_fin) {
        // The client is done sending: pass the half-close on; the pod's reply still comes back.
        boost::system::error_code ignored;
        pair->socket.shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
      }
      return;
    }
    pair->writing = true;
    asio::async_write(pair->socket, asio::buffer(pair->to_pod.front()),
                      [self = shared_from_this(), pair](boost::system::error_code ec, size_t) {
                        pair->writing = false;
                        if (!self->connection_) return;
                        self->connection_->Consumed(pair->to_pod.front().size());
                        pair->to_pod.pop_front();
                        if (pair->done) return;
                        if (ec) {
                          self->Fail(pair, "error writing to the pod: " + ec.message());
                          return;
                        }
                        self->WriteToPod(pair);
                      });
  }

  // The pod side ended (or the client reset the data stream): end both streams, as the CRI server
  // closes them when PortForward returns.
  void End(const std::shared_ptr<Pair>& pair) {
    if (pair->data_stream != 0) connection_->Write(pair->data_stream, "", true);
    if (pair->error_stream != 0) connection_->Write(pair->error_stream, "", true);
    Remove(pair);
  }

  void Fail(const std::shared_ptr<Pair>& pair, const std::string& error) {
    const std::string message = "error forwarding port " + std::to_string(pair->port) + " to pod " + ns_ + "/" + pod_ +
                                (uid_.empty() ? "" : ", uid " + uid_) + ": " + error;
    log::Info("kubelet API: " + message);
    if (pair->error_stream != 0) connection_->Write(pair->error_stream, message, true);
    if (pair->data_stream != 0) connection_->Reset(pair->data_stream);
    Remove(pair);
  }

  void Remove(const std::shared_ptr<Pair>& pair) {
    Close(*pair);
    // Bytes the pod will never get still count against the connection's inbound budget.
    size_t dropped = 0;
    for (size_t i = pair->writing ? 1 : 0; i < pair->to_pod.size(); ++i) dropped += pair->to_pod[i].size();
    if (pair->writing) {
      pair->to_pod.resize(1);  // released by the pending write's completion
    } else {
      pair->to_pod.clear();
    }
    connection_->Consumed(dropped);
    pairs_.erase(pair->request_id);
    for (auto it = by_stream_.begin(); it != by_stream_.end();) {
      it = it->second == pair ? by_stream_.erase(it) : std::next(it);
    }
  }

  static void Close(Pair& pair) {
    pair.done = true;
    pair.timer.cancel();
    boost::system::error_code ignored;
    pair.socket.close(ignored);
  }

  std::shared_ptr<SpdyConnection> connection_;
  const std::string ns_;
  const std::string pod_;
  const std::string uid_;
  const KubeletApiHooks hooks_;
  const std::chrono::milliseconds stream_creation_timeout_;
  std::map<std::string, std::shared_ptr<Pair>> pairs_;
  std::map<uint32_t, std::shared_ptr<Pair>> by_stream_;
};

}  // namespace

std::shared_ptr<SpdyConnection::Handler> StartPortForwardSession(std::shared_ptr<SpdyConnection> connection,
                                                                 std::string ns, std::string pod, std::string uid,
                                                                 KubeletApiHooks hooks,
                                                                 std::chrono::milliseconds stream_creation_timeout) {
  return std::make_shared<PortForwardSession>(std::move(connection), std::move(ns), std::move(pod), std::move(uid),
                                              std::move(hooks), stream_creation_timeout);
}

}  // namespace mf::local
