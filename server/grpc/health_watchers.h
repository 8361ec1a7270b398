// grpc.health.v1.Health/Watch subscriptions (server streaming). A watcher gets the current
// status at once, then one message each time it changes, until the client cancels or Stop().
// Changes are noticed when Notify() is called (e.g. on SetShuttingDown) and by re-evaluating
// every poll interval (model versions load and unload on their own schedule).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "grpc/health/v1/health.pb.h"
#include "http2/grpc_router.h"

namespace mf::server {

class HealthWatchers {
 public:
  using ServingStatus = grpc::health::v1::HealthCheckResponse::ServingStatus;
  using Evaluate = std::function<ServingStatus(const std::string& service)>;

  HealthWatchers(Evaluate evaluate, std::chrono::milliseconds poll_interval);
  ~HealthWatchers();  // Stop()s
  HealthWatchers(const HealthWatchers&) = delete;
  HealthWatchers& operator=(const HealthWatchers&) = delete;

  // Sends `service`'s status on `call` now and keeps it updated. After Stop(): UNAVAILABLE.
  void Watch(std::shared_ptr<http2::GrpcCall> call, std::string service);
  // Re-evaluates every watch now instead of at the next poll.
  void Notify();
  // Ends every watch with `status` (a client reconnects elsewhere) and joins the thread.
  void Stop(const Status& status);
  size_t size() const;

 private:
  struct Entry {
    std::shared_ptr<http2::GrpcCall> call;
    std::string service;
    ServingStatus last;
  };

  void Loop();
  void Remove(const Entry* entry);
  static bool Send(http2::GrpcCall& call, ServingStatus status);

  Evaluate evaluate_;
  std::chrono::milliseconds poll_interval_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool notified_ = false;
  bool stopped_ = false;
  std::vector<std::shared_ptr<Entry>> entries_;
  std::thread thread_;
};

}  // namespace mf::server
