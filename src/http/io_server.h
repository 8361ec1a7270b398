// The skeleton the HTTP/1.1 server (src/http/server.cc) and the HTTP/2 server
// (src/http2/server.cc) share: the io workers, the listening socket and its accept loop, the
// sweep of connection deadlines, and graceful / immediate shutdown with the connection counts
// behind it. What a connection does with its bytes stays with each protocol.
//
// One io_context per io thread. The acceptor hands every new socket to the next worker (round
// robin) and the connection then lives on that worker's thread only: its state, and the worker's
// set of connections, are touched by that thread alone, so the request path takes no lock. Only
// the counts below are shared, as atomics.
//
// A server declares its worker type by deriving from IoWorker<Connection> (adding per-thread
// state of its own) and owns an IoServer<Worker>. Connection must provide, all called on its io
// thread:
//   void Drain();                              // finish in-flight work, then close
//   void Close();                              // close now; erases itself from worker->connections
//   void CloseIfExpired(IoClock::time_point);  // enforce its own deadlines
#pragma once

#include <algorithm>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

#include "common/logging.h"
#include "common/status.h"

namespace mf::http {

using IoClock = std::chrono::steady_clock;

// Connection counts shared by a server and its connections (which report their close here).
struct ConnectionCounts {
  std::atomic<bool> draining{false};  // set by Drain() and Stop(); connections may read it
  std::atomic<uint64_t> accepted{0};
  std::atomic<uint64_t> open{0};

  // Io thread: a connection counted in `open` is closed for good.
  void ConnectionClosed() {
    if (open.fetch_sub(1) == 1) {
      std::lock_guard lock(idle_mu_);
      all_closed_.notify_all();
    }
  }

  // Blocks until no connection is open or `deadline` passed; true when none is open.
  bool WaitUntilAllClosed(std::chrono::milliseconds deadline) {
    std::unique_lock lock(idle_mu_);
    return all_closed_.wait_for(lock, deadline, [&] { return open.load() == 0; });
  }

 private:
  std::mutex idle_mu_;
  std::condition_variable all_closed_;  // notified when `open` drops to zero
};

// The io_context of the server io thread running the caller, or null on any other thread. A
// handler that starts asynchronous work of its own (a proxy's upstream exchange) can run it on
// its connection's thread and answer there, without handing the request to another thread.
inline boost::asio::io_context*& CurrentIoContextSlot() {
  thread_local boost::asio::io_context* context = nullptr;
  return context;
}
inline boost::asio::io_context* CurrentIoContext() { return CurrentIoContextSlot(); }

// One io thread: its io_context and the connections pinned to it (touched on that thread only).
template <class Connection>
struct IoWorker {
  using ConnectionType = Connection;

  boost::asio::io_context ioc{1};
  // Timeouts are coarse: one timer per io thread sweeps the connections' deadlines, instead of a
  // timer armed and cancelled around every read and write (which costs system calls per request).
  boost::asio::steady_timer sweep{ioc};
  std::unordered_set<Connection*> connections;
  std::thread thread;

  // Stop() calls this once the io thread has been joined, before it runs the completions of the
  // operations its closes aborted. A derived worker that takes work from other threads hides it
  // to stop taking work there.
  void OnIoThreadJoined() {}
};

// How often the sweep runs: a quarter of the shortest timeout it enforces, within [10 ms, longest].
inline std::chrono::milliseconds SweepInterval(std::chrono::milliseconds shortest_timeout,
                                               std::chrono::milliseconds longest) {
  return std::clamp<std::chrono::milliseconds>(shortest_timeout / 4, std::chrono::milliseconds(10), longest);
}

template <class Worker>
class IoServer {
 public:
  // Runs on `worker`'s io thread for every accepted socket: makes the connection and starts it.
  using StartConnection = std::function<void(const std::shared_ptr<Worker>& worker, boost::asio::ip::tcp::socket)>;

  // `protocol` ("http", "http2") prefixes log lines and error messages; `counts` must outlive this.
  IoServer(std::string protocol, ConnectionCounts* counts) : protocol_(std::move(protocol)), counts_(counts) {}
  ~IoServer() { Stop(); }
  IoServer(const IoServer&) = delete;
  IoServer& operator=(const IoServer&) = delete;

  // Makes the workers (io_threads 0: one per hardware thread), binds and listens. Nothing runs
  // until Run(). On error nothing is left open.
  Status Listen(const std::string& address, uint16_t port, int io_threads) {
    namespace asio = boost::asio;
    boost::system::error_code ec;
    auto ip = asio::ip::make_address(address, ec);
    if (ec) return InvalidArgument(protocol_ + " server address '" + address + "' is not an IP address");
    int threads = io_threads > 0 ? io_threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    for (int i = 0; i < threads; ++i) workers_.push_back(std::make_shared<Worker>());
    asio::ip::tcp::endpoint endpoint(ip, port);
    acceptor_.emplace(workers_[0]->ioc);
    acceptor_->open(endpoint.protocol(), ec);
    if (!ec) acceptor_->set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_->bind(endpoint, ec);
    if (!ec) acceptor_->listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      acceptor_.reset();
      workers_.clear();
      return Unavailable(protocol_ + " server cannot listen on " + address + ":" + std::to_string(port) + ": " +
                         ec.message());
    }
    port_ = acceptor_->local_endpoint().port();
    return Status::Ok();
  }

  // After a successful Listen(): accepts, sweeps every `sweep_interval` and starts the io threads.
  void Run(std::chrono::milliseconds sweep_interval, StartConnection start_connection) {
    start_connection_ = std::move(start_connection);
    Accept();
    for (auto& w : workers_) ScheduleSweep(w.get(), sweep_interval);
    for (auto& w : workers_) {
      w->thread = std::thread([w = w.get()] {
        auto guard = boost::asio::make_work_guard(w->ioc);
        CurrentIoContextSlot() = &w->ioc;
        w->ioc.run();
      });
    }
    started_ = true;
  }

  // True once Run() was called, also after Stop().
  bool started() const { return started_; }
  // The bound port; 0 before Listen().
  uint16_t port() const { return port_; }
  int io_threads() const { return static_cast<int>(workers_.size()); }

  // Stops accepting, asks every connection to Drain(), waits up to `deadline` for all of them to
  // close, then Stop()s. True when they all closed in time. Idempotent.
  bool Drain(std::chrono::milliseconds deadline) {
    if (!started_ || stopped_) return true;
    counts_->draining = true;
    boost::asio::post(workers_[0]->ioc, [this] { CloseAcceptor(); });
    for (auto& w : workers_) {
      boost::asio::post(w->ioc, [w = w.get()] {
        auto connections = Snapshot(*w);  // Drain() may close, which erases
        for (auto* c : connections) c->Drain();
      });
    }
    bool clean = counts_->WaitUntilAllClosed(deadline);
    if (!clean) {
      mf::log::Warning(protocol_ + " server drain deadline passed; closing remaining connections",
                       {{"open_connections", std::to_string(counts_->open.load())}});
    }
    Stop();
    return clean;
  }

  // Closes every connection on its own thread, then joins the io threads. Idempotent.
  void Stop() {
    if (!started_ || stopped_) return;
    stopped_ = true;
    counts_->draining = true;
    std::vector<std::future<void>> closed;
    for (size_t i = 0; i < workers_.size(); ++i) {
      auto done = std::make_shared<std::promise<void>>();
      closed.push_back(done->get_future());
      boost::asio::post(workers_[i]->ioc, [this, i, done] {
        if (i == 0) CloseAcceptor();
        Worker* w = workers_[i].get();
        w->sweep.cancel();
        for (auto* c : Snapshot(*w)) c->Close();
        done->set_value();
      });
    }
    for (auto& f : closed) f.wait();
    for (auto& w : workers_) w->ioc.stop();
    for (auto& w : workers_) {
      if (w->thread.joinable()) w->thread.join();
    }
    for (auto& w : workers_) w->OnIoThreadJoined();
    // Run the completions of the operations the closes aborted, so they release their connections.
    for (auto& w : workers_) {
      w->ioc.restart();
      while (w->ioc.poll() > 0) {
      }
    }
    acceptor_.reset();
  }

 private:
  using Connection = typename Worker::ConnectionType;

  // A copy of a worker's connections, for loops whose calls may erase from the set.
  static std::vector<Connection*> Snapshot(const Worker& w) {
    return std::vector<Connection*>(w.connections.begin(), w.connections.end());
  }

  // Closes the connections of `w` whose deadline passed, every `interval`, until the timer is cancelled.
  static void ScheduleSweep(Worker* w, std::chrono::milliseconds interval) {
    w->sweep.expires_after(interval);
    w->sweep.async_wait([w, interval](boost::system::error_code ec) {
      if (ec) return;
      auto now = IoClock::now();
      for (auto* c : Snapshot(*w)) c->CloseIfExpired(now);
      ScheduleSweep(w, interval);
    });
  }

  void CloseAcceptor() {
    boost::system::error_code ec;
    if (acceptor_) acceptor_->close(ec);
  }

  // Called by Run(), then again from the acceptor's completions on workers_[0]'s thread. `this`
  // outlives every handler it posts: Stop() runs what is pending before it returns, and a stopped
  // io_context is never run again.
  void Accept() {
    std::shared_ptr<Worker> target = workers_[next_worker_++ % workers_.size()];
    acceptor_->async_accept(
        target->ioc, [this, target](boost::system::error_code ec, boost::asio::ip::tcp::socket socket) {
          if (ec == boost::asio::error::operation_aborted || !acceptor_->is_open()) return;
          if (ec) {
            // EMFILE and friends: log, back off briefly instead of spinning.
            mf::log::Warning(protocol_ + " accept failed", {{"error", ec.message()}});
            auto timer = std::make_shared<boost::asio::steady_timer>(workers_[0]->ioc, std::chrono::milliseconds(50));
            timer->async_wait([this, timer](boost::system::error_code) {
              if (acceptor_->is_open()) Accept();
            });
            return;
          }
          counts_->accepted.fetch_add(1, std::memory_order_relaxed);
          counts_->open.fetch_add(1);
          boost::asio::post(target->ioc, [this, target, socket = std::move(socket)]() mutable {
            start_connection_(target, std::move(socket));
          });
          Accept();
        });
  }

  const std::string protocol_;
  ConnectionCounts* const counts_;
  StartConnection start_connection_;
  std::vector<std::shared_ptr<Worker>> workers_;
  std::optional<boost::asio::ip::tcp::acceptor> acceptor_;  // after workers_: uses workers_[0]'s io_context
  size_t next_worker_ = 0;
  uint16_t port_ = 0;
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace mf::http
