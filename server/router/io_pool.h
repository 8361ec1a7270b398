// The router's upstream io threads: one io_context per thread, handed out round robin to new
// upstream connections, which then live on that thread. A connection holds its io_context by
// shared_ptr, so a pooled connection may outlive the pool (its socket closes against a live
// context); Stop() joins the threads, after which no handler runs.
#pragma once

#include <algorithm>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace mf::router {

class IoPool {
 public:
  explicit IoPool(int threads) {
    threads = std::max(1, threads);
    for (int i = 0; i < threads; ++i) {
      contexts_.push_back(std::make_shared<boost::asio::io_context>(1));
      guards_.emplace_back(boost::asio::make_work_guard(*contexts_.back()));
    }
    for (auto& context : contexts_) threads_.emplace_back([context = context.get()] { context->run(); });
  }
  ~IoPool() { Stop(); }
  IoPool(const IoPool&) = delete;
  IoPool& operator=(const IoPool&) = delete;

  std::shared_ptr<boost::asio::io_context> Next() {
    return contexts_[next_.fetch_add(1, std::memory_order_relaxed) % contexts_.size()];
  }

  void Stop() {
    std::call_once(stopped_, [&] {
      for (auto& guard : guards_) guard.reset();
      for (auto& context : contexts_) context->stop();
      for (auto& thread : threads_) {
        if (thread.joinable()) thread.join();
      }
    });
  }

 private:
  std::vector<std::shared_ptr<boost::asio::io_context>> contexts_;
  std::vector<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> guards_;
  std::vector<std::thread> threads_;
  std::atomic<size_t> next_{0};
  std::once_flag stopped_;
};

}  // namespace mf::router
