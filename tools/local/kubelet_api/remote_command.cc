#include "tools/local/kubelet_api/remote_command.h"

#include <array>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <deque>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "common/logging.h"
#include "tools/local/kubelet_api/child_process.h"

namespace mf::local {
namespace {

namespace asio = boost::asio;
using Json = nlohmann::json;

constexpr char kV5[] = "v5.channel.k8s.io";
constexpr char kV4[] = "v4.channel.k8s.io";
constexpr char kV3[] = "v3.channel.k8s.io";
constexpr char kV2[] = "v2.channel.k8s.io";

constexpr size_t kOutputChunk = 32 * 1024;
constexpr size_t kMaxResizeLine = 4096;
// After the command exits, how long output may keep coming from processes it left behind holding
// its stdout/stderr (`sh -c 'sleep 100 &'`) before the session reports the exit anyway.
constexpr std::chrono::seconds kOutputDrainGrace(2);
// Where pidfd_open is unavailable the exit is polled.
constexpr std::chrono::milliseconds kExitPollInterval(50);

bool Flag(const QueryParams& query, std::string_view primary, std::string_view alias) {
  for (std::string_view name : {primary, alias}) {
    auto v = QueryValue(query, name);
    if (v && (*v == "1" || *v == "true")) return true;
  }
  return false;
}

// metav1.Status as the CRI streaming server writes it on the v4 error stream.
std::string StatusJson(const std::string& status, const std::string& message, const std::string& reason,
                       const Json& causes, int code) {
  Json j = {{"metadata", Json::object()}, {"status", status}};
  if (!message.empty()) j["message"] = message;
  if (!reason.empty()) j["reason"] = reason;
  if (!causes.is_null()) j["details"] = {{"causes", causes}};
  if (code != 0) j["code"] = code;
  return j.dump();
}

enum Channel { kError, kStdin, kStdout, kStderr, kResize, kChannels };

std::optional<Channel> ChannelOf(std::string_view stream_type) {
  if (stream_type == "error") return kError;
  if (stream_type == "stdin") return kStdin;
  if (stream_type == "stdout") return kStdout;
  if (stream_type == "stderr") return kStderr;
  if (stream_type == "resize") return kResize;
  return std::nullopt;
}

class ExecSession : public SpdyConnection::Handler, public std::enable_shared_from_this<ExecSession> {
 public:
  ExecSession(std::shared_ptr<SpdyConnection> connection, int version, ExecOptions options, ExecTarget target)
      : connection_(std::move(connection)),
        version_(version),
        options_(std::move(options)),
        target_(std::move(target)),
        timer_(connection_->executor()),
        exit_poll_(connection_->executor()),
        stdin_pipe_(connection_->executor()),
        stdout_pipe_(connection_->executor()),
        stderr_pipe_(connection_->executor()),
        pidfd_(connection_->executor()) {
    wanted_[kError] = true;
    wanted_[kStdin] = options_.want_stdin;
    wanted_[kStdout] = options_.want_stdout;
    wanted_[kStderr] = options_.want_stderr;
    wanted_[kResize] = options_.tty && version_ >= 3;
  }

  ~ExecSession() override {
    // Only reached with the child unreaped when the server stops mid-session: no io thread will
    // run the exit watcher any more.
    if (child_.pid > 0 && !reaped_) {
      KillProcessGroup(child_.pid);
      Reap();
    }
  }

  void Begin(std::chrono::milliseconds stream_creation_timeout) {
    timer_.expires_after(stream_creation_timeout);
    timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (ec || self->started_ || !self->connection_) return;
      log::Warning("kubelet API: exec client did not open its streams in time; closing");
      self->connection_->Close();
    });
  }

  void OnStreamOpened(uint32_t stream_id, const spdy::Headers& headers, bool /*fin*/) override {
    std::optional<Channel> channel = ChannelOf(spdy::HeaderValue(headers, "streamtype"));
    if (!channel || !wanted_[*channel] || streams_[*channel] != 0 || started_) {
      connection_->Refuse(stream_id);
      return;
    }
    streams_[*channel] = stream_id;
    connection_->Reply(stream_id);
    for (int c = 0; c < kChannels; ++c) {
      if (wanted_[c] && streams_[c] == 0) return;
    }
    started_ = true;
    timer_.cancel();
    StartCommand();
  }

  void OnData(uint32_t stream_id, std::string data, bool fin) override {
    if (stream_id == streams_[kStdin]) {
      if (!data.empty()) {
        if (!started_ || stdin_pipe_.is_open()) {
          stdin_queue_.push_back(std::move(data));
          WriteStdin();
        } else {
          connection_->Consumed(data.size());  // the command stopped reading (or has not started)
        }
      }
      if (fin) {
        stdin_fin_ = true;
        WriteStdin();
      }
      return;
    }
    connection_->Consumed(data.size());
    if (stream_id == streams_[kResize]) OnResizeBytes(data);
  }

  void OnStreamReset(uint32_t stream_id) override {
    if (stream_id == streams_[kStdin]) CloseStdin();
    if (stream_id == streams_[kStdout]) CloseDescriptor(stdout_pipe_);
    if (stream_id == streams_[kStderr]) CloseDescriptor(stderr_pipe_);
    for (auto& id : streams_) {
      if (id == stream_id) id = 0;
    }
  }

  void OnConnectionClosed() override {
    // The session is over: the command goes too, with whatever it left running in its group. The
    // exited leader is reaped only now, so its process group id cannot have been reused.
    if (child_.pid > 0 && !reaped_) {
      KillProcessGroup(child_.pid);
      if (exited_) Reap();
    }
    timer_.cancel();
    CloseStdin();
    CloseDescriptor(stdout_pipe_);
    CloseDescriptor(stderr_pipe_);
    connection_.reset();
  }

 private:
  void StartCommand() {
    ChildSpec spec;
    for (const auto& arg : options_.command) spec.argv.push_back(target_.rewrite_arg ? target_.rewrite_arg(arg) : arg);
    spec.env = target_.env;
    spec.working_dir = target_.working_dir;
    spec.tty = options_.tty;
    spec.pipe_stdin = options_.want_stdin;
    spec.pipe_stdout = options_.want_stdout;
    spec.pipe_stderr = options_.want_stderr;
    StatusOr<Child> child = SpawnChild(spec);
    if (!child.ok()) {
      log::Info("kubelet API: exec could not start the command", {{"error", child.status().message()}});
      ReportInternalError(child.status().message());
      return;
    }
    child_ = *child;
    if (child_.stdin_fd >= 0) {
      if (options_.want_stdin) {
        stdin_pipe_.assign(child_.stdin_fd);
      } else {
        close(child_.stdin_fd);
      }
    }
    if (child_.stdout_fd >= 0) stdout_pipe_.assign(child_.stdout_fd);
    if (child_.stderr_fd >= 0) stderr_pipe_.assign(child_.stderr_fd);
    if (terminal_size_) ApplyTerminalSize();
    ReadOutput(kStdout, stdout_pipe_, stdout_buffer_);
    ReadOutput(kStderr, stderr_pipe_, stderr_buffer_);
    WatchExit();
    WriteStdin();
  }

  void ReadOutput(Channel channel, asio::posix::stream_descriptor& pipe, std::array<char, kOutputChunk>& buffer) {
    if (!pipe.is_open()) {
      output_done_[channel] = true;
      MaybeReport();
      return;
    }
    pipe.async_read_some(asio::buffer(buffer),
                         [self = shared_from_this(), channel, &pipe, &buffer](boost::system::error_code ec, size_t n) {
                           // EOF, or EIO from a terminal whose last writer closed it.
                           if (ec || !self->connection_) {
                             CloseDescriptor(pipe);
                             self->output_done_[channel] = true;
                             self->MaybeReport();
                             return;
                           }
                           self->connection_->Write(self->streams_[channel], std::string(buffer.data(), n), false,
                                                    [self, channel, &pipe, &buffer](bool written) {
                                                      if (!written) CloseDescriptor(pipe);
                                                      self->ReadOutput(channel, pipe, buffer);
                                                    });
                         });
  }

  void WriteStdin() {
    if (stdin_writing_ || !stdin_pipe_.is_open()) return;
    if (stdin_queue_.empty()) {
      // The terminal stays open after the client's stdin ends: closing our side of a pty would not
      // signal EOF to the command anyway, and it still writes its output there.
      if (stdin_fin_ && !options_.tty) CloseStdin();
      return;
    }
    stdin_writing_ = true;
    asio::async_write(stdin_pipe_, asio::buffer(stdin_queue_.front()),
                      [self = shared_from_this()](boost::system::error_code ec, size_t) {
                        self->stdin_writing_ = false;
                        if (!self->connection_) return;
                        self->connection_->Consumed(self->stdin_queue_.front().size());
                        self->stdin_queue_.pop_front();
                        if (ec) {
                          self->CloseStdin();  // EPIPE: the command closed its stdin
                          return;
                        }
                        self->WriteStdin();
                      });
  }

  void CloseStdin() {
    CloseDescriptor(stdin_pipe_);
    if (stdin_writing_) return;  // the pending write completes (aborted) and releases its chunk
    size_t dropped = 0;
    for (const auto& chunk : stdin_queue_) dropped += chunk.size();
    stdin_queue_.clear();
    if (connection_ && dropped > 0) connection_->Consumed(dropped);
  }

  static void CloseDescriptor(asio::posix::stream_descriptor& d) {
    boost::system::error_code ignored;
    if (d.is_open()) d.close(ignored);
  }

  void OnResizeBytes(const std::string& data) {
    resize_line_ += data;
    size_t newline;
    while ((newline = resize_line_.find('\n')) != std::string::npos) {
      Json size = Json::parse(resize_line_.substr(0, newline), nullptr, /*allow_exceptions=*/false);
      resize_line_.erase(0, newline + 1);
      if (size.is_object() && size.value("Width", -1) >= 0 && size.value("Height", -1) >= 0) {
        terminal_size_ = {static_cast<uint16_t>(size.value("Width", 0)),
                          static_cast<uint16_t>(size.value("Height", 0))};
        ApplyTerminalSize();
      }
    }
    if (resize_line_.size() > kMaxResizeLine) resize_line_.clear();  // not the resize protocol
  }

  void ApplyTerminalSize() {
    if (!terminal_size_ || !options_.tty || !stdout_pipe_.is_open()) return;
    Status s = SetTerminalSize(stdout_pipe_.native_handle(), terminal_size_->first, terminal_size_->second);
    if (!s.ok()) log::Debug("kubelet API: exec resize failed", {{"error", s.message()}});
  }

  void WatchExit() {
    auto on_ready = [self = shared_from_this()](boost::system::error_code ec) {
      if (ec == asio::error::operation_aborted) return;
      std::optional<int> code = PeekExit(self->child_.pid);
      if (!code) {
        self->WatchExit();
        return;
      }
      self->exited_ = true;
      self->exit_code_ = *code;
      boost::system::error_code ignored;
      self->pidfd_.close(ignored);
      if (!self->connection_) {
        self->Reap();  // killed because the connection closed
        return;
      }
      if (!self->AllOutputDone()) {
        self->timer_.expires_after(kOutputDrainGrace);
        self->timer_.async_wait([self](boost::system::error_code timer_ec) {
          if (timer_ec) return;
          CloseDescriptor(self->stdout_pipe_);
          CloseDescriptor(self->stderr_pipe_);
        });
      }
      self->MaybeReport();
    };
    if (child_.pidfd >= 0) {
      if (!pidfd_.is_open()) pidfd_.assign(child_.pidfd);
      pidfd_.async_wait(asio::posix::stream_descriptor::wait_read, std::move(on_ready));
    } else {
      exit_poll_.expires_after(kExitPollInterval);
      exit_poll_.async_wait(std::move(on_ready));
    }
  }

  void Reap() {
    ReapChild(child_.pid, /*block=*/true);
    reaped_ = true;
  }

  bool AllOutputDone() const { return output_done_[kStdout] && output_done_[kStderr]; }

  void MaybeReport() {
    if (!exited_ || !AllOutputDone() || reported_) return;
    timer_.cancel();
    if (exit_code_ == 0) {
      Report(StatusJson("Success", "", "", nullptr, 0), "");
    } else if (exit_code_ > 0) {
      const std::string message =
          "command terminated with non-zero exit code: exit status " + std::to_string(exit_code_);
      Report(StatusJson("Failure", message, "NonZeroExitCode",
                        Json::array({{{"reason", "ExitCode"}, {"message", std::to_string(exit_code_)}}}), 0),
             message);
    } else {
      ReportInternalError("the exit status of the command is unknown (another part of this process reaped it)");
    }
  }

  void ReportInternalError(const std::string& error) {
    const std::string cause = "error executing command in container: " + error;
    Report(StatusJson("Failure", "Internal error occurred: " + cause, "InternalError",
                      Json::array({{{"message", cause}}}), 500),
           cause);
  }

  // As the CRI streaming server finishes: no more input, the outcome on the error stream (v4+:
  // `status_json`; v2/v3: `failure_text`, empty on success), every output stream ended; then the
  // client closes the connection once it has read everything.
  void Report(const std::string& status_json, const std::string& failure_text) {
    if (reported_ || !connection_) return;
    reported_ = true;
    for (Channel c : {kStdin, kResize}) {
      if (streams_[c] != 0) connection_->Reset(streams_[c]);
    }
    CloseStdin();
    connection_->Write(streams_[kError], version_ >= 4 ? status_json : failure_text, true);
    for (Channel c : {kStdout, kStderr}) {
      if (streams_[c] != 0) connection_->Write(streams_[c], "", true);
    }
    connection_->Finish();
  }

  std::shared_ptr<SpdyConnection> connection_;
  const int version_;
  const ExecOptions options_;
  const ExecTarget target_;
  std::array<bool, kChannels> wanted_{};
  std::array<uint32_t, kChannels> streams_{};
  std::array<bool, kChannels> output_done_{};
  bool started_ = false;
  bool reported_ = false;
  Child child_;
  bool exited_ = false;  // exited; a zombie until reaped
  bool reaped_ = false;
  int exit_code_ = -1;
  asio::steady_timer timer_;      // stream creation, then the output drain grace
  asio::steady_timer exit_poll_;  // without pidfd
  asio::posix::stream_descriptor stdin_pipe_;
  asio::posix::stream_descriptor stdout_pipe_;
  asio::posix::stream_descriptor stderr_pipe_;
  asio::posix::stream_descriptor pidfd_;
  std::array<char, kOutputChunk> stdout_buffer_;
  std::array<char, kOutputChunk> stderr_buffer_;
  std::deque<std::string> stdin_queue_;
  bool stdin_writing_ = false;
  bool stdin_fin_ = false;
  std::string resize_line_;
  std::optional<std::pair<uint16_t, uint16_t>> terminal_size_;  // columns, rows
};

}  // namespace

StatusOr<ExecOptions> ParseExecOptions(const QueryParams& query) {
  ExecOptions options;
  options.command = QueryValues(query, "command");
  options.tty = Flag(query, "tty", "tty");
  options.want_stdin = Flag(query, "input", "stdin");
  options.want_stdout = Flag(query, "output", "stdout");
  options.want_stderr = Flag(query, "error", "stderr") && !options.tty;
  if (!options.want_stdin && !options.want_stdout && !options.want_stderr) {
    return InvalidArgument("you must specify at least 1 of stdin, stdout, stderr");
  }
  if (options.command.empty() || options.command[0].empty()) {
    return InvalidArgument("you must specify at least one command for the container");
  }
  return options;
}

const std::vector<std::string>& RemoteCommandProtocols() {
  static const std::vector<std::string> protocols = {kV5, kV4, kV3, kV2};
  return protocols;
}

std::string NegotiateProtocol(const std::vector<std::string>& offered_header_values,
                              const std::vector<std::string>& supported) {
  for (const auto& value : offered_header_values) {
    std::string_view rest = value;
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      std::string_view offer = rest.substr(0, comma);
      rest.remove_prefix(comma == std::string_view::npos ? rest.size() : comma + 1);
      while (!offer.empty() && offer.front() == ' ') offer.remove_prefix(1);
      while (!offer.empty() && offer.back() == ' ') offer.remove_suffix(1);
      for (const auto& s : supported) {
        if (offer == s) return s;
      }
    }
  }
  return "";
}

std::shared_ptr<SpdyConnection::Handler> StartExecSession(std::shared_ptr<SpdyConnection> connection,
                                                          const std::string& protocol, ExecOptions options,
                                                          ExecTarget target,
                                                          std::chrono::milliseconds stream_creation_timeout) {
  const int version = protocol == kV5 ? 5 : protocol == kV4 ? 4 : protocol == kV3 ? 3 : 2;
  auto session = std::make_shared<ExecSession>(std::move(connection), version, std::move(options), std::move(target));
  session->Begin(stream_creation_timeout);
  return session;
}

}  // namespace mf::local
