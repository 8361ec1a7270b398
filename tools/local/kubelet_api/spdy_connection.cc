#include "tools/local/kubelet_api/spdy_connection.h"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <utility>

#include "common/logging.h"

namespace mf::local {
namespace {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

constexpr size_t kReadChunk = 64 * 1024;
constexpr size_t kMaxWriteBatch = 256 * 1024;

}  // namespace

SpdyConnection::SpdyConnection(std::unique_ptr<TlsStream> stream, std::string already_read,
                               SpdyConnectionOptions options)
    : stream_(std::move(stream)),
      executor_(stream_->get_executor()),
      pending_input_(std::move(already_read)),
      options_(options),
      read_buffer_(kReadChunk),
      last_activity_(Clock::now()),
      idle_timer_(executor_),
      finish_timer_(executor_) {}

SpdyConnection::~SpdyConnection() = default;

void SpdyConnection::Start(std::shared_ptr<Handler> handler) {
  handler_ = std::move(handler);
  ScheduleIdleCheck();
  if (!pending_input_.empty()) {
    std::string bytes = std::move(pending_input_);
    OnBytes(bytes);
  }
  ReadMore();
}

bool SpdyConnection::ReadingPaused() const {
  return inbound_buffered_ > options_.max_inbound_buffered || queued_bytes_ > options_.max_outbound_queued ||
         close_after_writes_;
}

void SpdyConnection::ReadMore() {
  if (reading_ || closed_ || ReadingPaused()) return;
  reading_ = true;
  stream_->async_read_some(asio::buffer(read_buffer_),
                           [self = shared_from_this()](boost::system::error_code ec, size_t n) {
                             self->reading_ = false;
                             if (self->closed_) return;
                             if (ec) {
                               // EOF or a reset: the client is gone (or done, after Finish()).
                               self->Close();
                               return;
                             }
                             self->last_activity_ = Clock::now();
                             self->OnBytes(std::string_view(self->read_buffer_.data(), n));
                             self->ReadMore();
                           });
}

void SpdyConnection::OnBytes(std::string_view bytes) {
  std::vector<spdy::Frame> frames;
  Status parsed = reader_.Feed(bytes, &frames);
  for (auto& frame : frames) {
    if (closed_) return;
    Dispatch(frame);
  }
  if (!parsed.ok() && !closed_) {
    log::Warning("kubelet API: closing a SPDY connection that sent a malformed frame", {{"error", parsed.message()}});
    Enqueue(spdy::EncodeGoAway(last_client_stream_, spdy::GoAwayStatus::kProtocolError));
    close_after_writes_ = true;
  }
}

void SpdyConnection::Dispatch(spdy::Frame& frame) {
  using spdy::FrameType;
  switch (frame.type) {
    case FrameType::kSynStream: {
      const uint32_t id = frame.stream_id;
      // Client streams are odd and increase (draft 3.1, 2.3.2).
      if (id % 2 == 0 || id <= last_client_stream_) {
        Enqueue(spdy::EncodeRstStream(id, spdy::RstStatus::kProtocolError));
        return;
      }
      last_client_stream_ = id;
      if (goaway_received_ || finishing_ || streams_.size() >= options_.max_streams) {
        Enqueue(spdy::EncodeRstStream(id, spdy::RstStatus::kRefusedStream));
        return;
      }
      StreamState state;
      state.remote_fin = frame.fin();
      state.local_fin = (frame.flags & spdy::kFlagUnidirectional) != 0;
      streams_[id] = state;
      handler_->OnStreamOpened(id, frame.headers, frame.fin());
      return;
    }
    case FrameType::kData: {
      auto it = streams_.find(frame.stream_id);
      if (it == streams_.end() || it->second.remote_fin) return;  // closed or reset: drop, as spdystream does
      const bool fin = frame.fin();
      if (fin) it->second.remote_fin = true;
      inbound_buffered_ += frame.data.size();
      handler_->OnData(frame.stream_id, std::move(frame.data), fin);
      EraseIfDone(frame.stream_id);
      return;
    }
    case FrameType::kRstStream:
      if (streams_.erase(frame.stream_id) > 0) handler_->OnStreamReset(frame.stream_id);
      return;
    case FrameType::kPing:
      // Odd ids are the client's pings: echo them. Even ones would answer ours; we send none.
      if (frame.id % 2 == 1) Enqueue(spdy::EncodePing(frame.id));
      return;
    case FrameType::kGoAway:
      goaway_received_ = true;
      if (finishing_) {
        close_after_writes_ = true;
        WriteMore();
      }
      return;
    case FrameType::kSynReply:  // we open no streams
    case FrameType::kHeaders:
    case FrameType::kSettings:
    case FrameType::kWindowUpdate:  // see the header: windows are not enforced by either side
      return;
  }
}

void SpdyConnection::Reply(uint32_t stream_id) {
  if (closed_ || streams_.count(stream_id) == 0) return;
  Enqueue(writer_.SynReply(stream_id, {}));
}

void SpdyConnection::Refuse(uint32_t stream_id) {
  if (closed_ || streams_.erase(stream_id) == 0) return;
  Enqueue(spdy::EncodeRstStream(stream_id, spdy::RstStatus::kRefusedStream));
}

void SpdyConnection::Reset(uint32_t stream_id) {
  if (closed_ || streams_.erase(stream_id) == 0) return;
  Enqueue(spdy::EncodeRstStream(stream_id, spdy::RstStatus::kCancel));
}

void SpdyConnection::Write(uint32_t stream_id, std::string data, bool fin, std::function<void(bool)> written) {
  auto it = streams_.find(stream_id);
  if (closed_ || it == streams_.end() || it->second.local_fin) {
    if (written) asio::post(executor_, [written = std::move(written)] { written(false); });
    return;
  }
  if (fin) it->second.local_fin = true;
  // Our producers write at most 32 KiB at a time; split anyway so no frame exceeds the 24-bit length.
  std::string_view rest = data;
  while (rest.size() > spdy::kMaxFramePayload) {
    Enqueue(spdy::EncodeData(stream_id, rest.substr(0, spdy::kMaxFramePayload), false));
    rest.remove_prefix(spdy::kMaxFramePayload);
  }
  Enqueue(spdy::EncodeData(stream_id, rest, fin), std::move(written));
  EraseIfDone(stream_id);
}

void SpdyConnection::Consumed(size_t bytes) {
  const bool was_paused = ReadingPaused();
  inbound_buffered_ -= std::min(bytes, inbound_buffered_);
  if (was_paused) ReadMore();
}

void SpdyConnection::Finish() {
  if (closed_ || finishing_) return;
  finishing_ = true;
  if (goaway_received_) {
    close_after_writes_ = true;
    WriteMore();
    return;
  }
  finish_timer_.expires_after(options_.finish_timeout);
  finish_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
    if (!ec) self->Close();
  });
}

void SpdyConnection::EraseIfDone(uint32_t stream_id) {
  auto it = streams_.find(stream_id);
  if (it != streams_.end() && it->second.local_fin && it->second.remote_fin) streams_.erase(it);
}

void SpdyConnection::Enqueue(std::string bytes, std::function<void(bool)> written) {
  if (closed_) {
    if (written) asio::post(executor_, [written = std::move(written)] { written(false); });
    return;
  }
  queued_bytes_ += bytes.size();
  queue_.push_back({std::move(bytes), std::move(written)});
  WriteMore();
}

void SpdyConnection::WriteMore() {
  if (writing_ || closed_) return;
  if (queue_.empty()) {
    if (close_after_writes_) Close();
    return;
  }
  size_t batch_bytes = 0;
  while (!queue_.empty() && (in_flight_.empty() || batch_bytes + queue_.front().bytes.size() <= kMaxWriteBatch)) {
    batch_bytes += queue_.front().bytes.size();
    in_flight_.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  std::vector<asio::const_buffer> buffers;
  buffers.reserve(in_flight_.size());
  for (const auto& o : in_flight_) buffers.emplace_back(asio::buffer(o.bytes));
  writing_ = true;
  asio::async_write(*stream_, buffers, [self = shared_from_this(), batch_bytes](boost::system::error_code ec, size_t) {
    self->writing_ = false;
    std::vector<Outgoing> batch = std::move(self->in_flight_);
    self->in_flight_.clear();
    if (ec || self->closed_) {
      self->FailCallbacks(std::move(batch));
      self->Close();
      return;
    }
    const bool was_paused = self->ReadingPaused();
    self->queued_bytes_ -= batch_bytes;
    self->last_activity_ = Clock::now();
    for (auto& o : batch) {
      if (o.written) o.written(true);
    }
    self->WriteMore();
    if (was_paused) self->ReadMore();
  });
}

void SpdyConnection::FailCallbacks(std::vector<Outgoing> batch) {
  for (auto& o : batch) {
    if (o.written) asio::post(executor_, [written = std::move(o.written)] { written(false); });
  }
}

void SpdyConnection::ScheduleIdleCheck() {
  const auto interval = std::clamp<std::chrono::milliseconds>(options_.idle_timeout / 4, std::chrono::milliseconds(10),
                                                              std::chrono::milliseconds(60'000));
  idle_timer_.expires_after(interval);
  idle_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
    if (ec || self->closed_) return;
    if (Clock::now() - self->last_activity_ > self->options_.idle_timeout) {
      log::Info("kubelet API: closing an idle SPDY connection");
      self->Close();
      return;
    }
    self->ScheduleIdleCheck();
  });
}

void SpdyConnection::Close() {
  if (closed_) return;
  closed_ = true;
  idle_timer_.cancel();
  finish_timer_.cancel();
  boost::system::error_code ignored;
  stream_->lowest_layer().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  stream_->lowest_layer().close(ignored);
  std::vector<Outgoing> queued(std::make_move_iterator(queue_.begin()), std::make_move_iterator(queue_.end()));
  queue_.clear();
  queued_bytes_ = 0;
  FailCallbacks(std::move(queued));
  streams_.clear();
  if (auto handler = std::move(handler_)) handler->OnConnectionClosed();
}

}  // namespace mf::local
