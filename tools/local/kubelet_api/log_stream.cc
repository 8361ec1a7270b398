#include "tools/local/kubelet_api/log_stream.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>
#include <cstdio>
#include <string>
#include <utility>

#include "common/logging.h"

namespace mf::local {
namespace {

namespace asio = boost::asio;

constexpr size_t kLogReadChunk = 32 * 1024;

class LogStreamer : public std::enable_shared_from_this<LogStreamer> {
 public:
  LogStreamer(std::unique_ptr<TlsStream> stream, LogStreamRequest request)
      : stream_(std::move(stream)), request_(std::move(request)), timer_(stream_->get_executor()) {}

  ~LogStreamer() {
    if (fd_ >= 0) close(fd_);
  }

  void Start() {
    if (!OpenFile()) return;
    if (request_.options.tail_lines) {
      StatusOr<uint64_t> offset = TailOffset(fd_, FileSize(), *request_.options.tail_lines);
      if (!offset.ok()) {
        log::Warning("kubelet API: cannot find the tail of a log", {{"error", offset.status().message()}});
        Shutdown();
        return;
      }
      offset_ = *offset;
    }
    // A client has nothing more to send on this connection: a read completing means it went away.
    WatchHangup();
    Send("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
         [self = shared_from_this()] { self->Pump(); });
  }

 private:
  // False when the connection was closed because the file cannot be read. A missing file is an
  // empty log for now (the container may not have written anything yet).
  bool OpenFile() {
    if (fd_ >= 0) return true;
    fd_ = open(request_.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ >= 0 || errno == ENOENT) return true;
    log::Warning("kubelet API: cannot open a container log",
                 {{"path", request_.path.string()}, {"error", std::strerror(errno)}});
    Shutdown();
    return false;
  }

  // Whether the path now names another file than the one being followed: the node agent moved
  // this instance's log aside (a restart) or removed it. Following the old file would hang.
  bool Replaced() const {
    if (fd_ < 0) return false;  // not created yet
    struct stat followed {};
    struct stat current {};
    if (fstat(fd_, &followed) != 0 || stat(request_.path.c_str(), &current) != 0) return true;
    return followed.st_ino != current.st_ino || followed.st_dev != current.st_dev;
  }

  uint64_t FileSize() const {
    const off_t end = lseek(fd_, 0, SEEK_END);
    return end < 0 ? 0 : static_cast<uint64_t>(end);
  }

  void WatchHangup() {
    stream_->async_read_some(asio::buffer(discard_), [self = shared_from_this()](boost::system::error_code ec, size_t) {
      if (self->closed_) return;
      if (ec) {
        self->Shutdown();
        return;
      }
      self->WatchHangup();
    });
  }

  void Pump() {
    if (closed_) return;
    const auto& limit = request_.options.limit_bytes;
    if (limit && sent_ >= static_cast<uint64_t>(*limit)) {
      End();
      return;
    }
    size_t want = kLogReadChunk;
    if (limit) want = static_cast<size_t>(std::min<uint64_t>(want, static_cast<uint64_t>(*limit) - sent_));
    ssize_t n = 0;
    if (OpenFile() && fd_ >= 0) {
      do {
        n = pread(fd_, buffer_.data(), want, static_cast<off_t>(offset_));
      } while (n < 0 && errno == EINTR);
    }
    if (n < 0) {
      log::Warning("kubelet API: cannot read a container log", {{"error", std::strerror(errno)}});
      Shutdown();
      return;
    }
    if (n > 0) {
      offset_ += static_cast<uint64_t>(n);
      sent_ += static_cast<uint64_t>(n);
      char size_line[32];
      const int len = std::snprintf(size_line, sizeof(size_line), "%zx\r\n", static_cast<size_t>(n));
      std::string chunk(size_line, static_cast<size_t>(len));
      chunk.append(buffer_.data(), static_cast<size_t>(n));
      chunk += "\r\n";
      Send(std::move(chunk), [self = shared_from_this()] { self->Pump(); });
      return;
    }
    // At the end of what is written so far.
    if (!request_.options.follow || draining_) {
      End();
      return;
    }
    if (!request_.keep_following || !request_.keep_following() || Replaced()) {
      draining_ = true;  // read once more to the end: the last output may have come after our read
      Pump();
      return;
    }
    timer_.expires_after(request_.poll_interval);
    timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (!ec) self->Pump();
    });
  }

  void End() {
    Send("0\r\n\r\n", [self = shared_from_this()] { self->Shutdown(); });
  }

  void Send(std::string bytes, std::function<void()> then) {
    out_ = std::move(bytes);
    asio::async_write(*stream_, asio::buffer(out_),
                      [self = shared_from_this(), then = std::move(then)](boost::system::error_code ec, size_t) {
                        if (self->closed_) return;
                        if (ec) {
                          self->Shutdown();
                          return;
                        }
                        then();
                      });
  }

  void Shutdown() {
    if (closed_) return;
    closed_ = true;
    timer_.cancel();
    boost::system::error_code ignored;
    stream_->lowest_layer().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    stream_->lowest_layer().close(ignored);
  }

  std::unique_ptr<TlsStream> stream_;
  LogStreamRequest request_;
  asio::steady_timer timer_;
  int fd_ = -1;
  uint64_t offset_ = 0;
  uint64_t sent_ = 0;
  bool draining_ = false;
  bool closed_ = false;
  std::array<char, kLogReadChunk> buffer_;
  std::array<char, 512> discard_;
  std::string out_;
};

}  // namespace

void StreamContainerLog(std::unique_ptr<TlsStream> stream, LogStreamRequest request) {
  std::make_shared<LogStreamer>(std::move(stream), std::move(request))->Start();
}

}  // namespace mf::local
