// One upstream address (a serving pod's REST or gRPC port) and the state that must outlive any
// one snapshot: requests in flight (least-outstanding picking), consecutive failures and
// ejection (outlier detection), and its pooled connections. Snapshots share Endpoint objects
// through the EndpointRegistry, so a config or endpoint change keeps all of that for addresses
// that stay; an address that goes away lives until its last request finishes.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace mf::router {

using Clock = std::chrono::steady_clock;

struct OutlierPolicy {
  int consecutive_failures = 5;  // 0: never eject
  std::chrono::milliseconds ejection{30'000};
};

// Connections to one endpoint kept between requests: idle HTTP/1.1 connections, or shared HTTP/2
// ones. Each upstream client owns the type it stores here.
struct ConnectionShelf {
  std::mutex mu;
  std::vector<std::shared_ptr<void>> items;
};

class Endpoint {
 public:
  explicit Endpoint(std::string address) : address_(std::move(address)) {}
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  const std::string& address() const { return address_; }

  int outstanding() const { return outstanding_.load(std::memory_order_relaxed); }
  void Begin() { outstanding_.fetch_add(1, std::memory_order_relaxed); }
  void End() { outstanding_.fetch_sub(1, std::memory_order_relaxed); }

  bool Ejected(Clock::time_point now) const {
    return now.time_since_epoch().count() < ejected_until_.load(std::memory_order_relaxed);
  }
  void RecordSuccess() { consecutive_failures_.store(0, std::memory_order_relaxed); }
  // A connect failure, reset, timeout or 5xx. True when this failure ejected the endpoint.
  bool RecordFailure(Clock::time_point now, const OutlierPolicy& policy) {
    int failures = consecutive_failures_.fetch_add(1, std::memory_order_relaxed) + 1;
    if (policy.consecutive_failures <= 0 || failures < policy.consecutive_failures) return false;
    consecutive_failures_.store(0, std::memory_order_relaxed);
    ejected_until_.store((now + policy.ejection).time_since_epoch().count(), std::memory_order_relaxed);
    return true;
  }

  ConnectionShelf& connections() { return connections_; }

 private:
  const std::string address_;
  std::atomic<int> outstanding_{0};
  std::atomic<int> consecutive_failures_{0};
  std::atomic<Clock::rep> ejected_until_{0};
  ConnectionShelf connections_;
};

// Hands out one Endpoint per key ("rest/10.0.0.1:8501"), the same object while any snapshot or
// request still holds it. Used by the thread that builds snapshots.
class EndpointRegistry {
 public:
  std::shared_ptr<Endpoint> Get(const std::string& kind, const std::string& address) {
    std::lock_guard lock(mu_);
    std::weak_ptr<Endpoint>& slot = endpoints_[kind + "/" + address];
    std::shared_ptr<Endpoint> endpoint = slot.lock();
    if (!endpoint) {
      endpoint = std::make_shared<Endpoint>(address);
      slot = endpoint;
    }
    if (++gets_since_prune_ > 4096) Prune();
    return endpoint;
  }

 private:
  void Prune() {
    gets_since_prune_ = 0;
    for (auto it = endpoints_.begin(); it != endpoints_.end();) {
      it = it->second.expired() ? endpoints_.erase(it) : std::next(it);
    }
  }

  std::mutex mu_;
  std::map<std::string, std::weak_ptr<Endpoint>> endpoints_;
  int gets_since_prune_ = 0;
};

}  // namespace mf::router
