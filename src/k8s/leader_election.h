// Leader election on a coordination.k8s.io/v1 Lease, with client-go's algorithm: a candidate
// takes the lease when it is free or when its holder has not renewed it for leaseDurationSeconds
// as observed on the candidate's own clock (no clock comparison across machines); the leader
// renews every retry period and steps down when it cannot renew within the renew deadline.
// Updates are compare-and-swap on resourceVersion, so two candidates never both win.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>

#include "k8s/client.h"

namespace mf::k8s {

struct LeaderElectionConfig {
  std::string lease_namespace;
  std::string lease_name;
  std::string identity;  // unique per candidate, e.g. the pod name
  std::chrono::milliseconds lease_duration{15'000};
  std::chrono::milliseconds renew_deadline{10'000};
  std::chrono::milliseconds retry_period{2'000};
  // Give the lease up on a clean stop so the next leader need not wait for it to expire.
  bool release_on_cancel = true;
  // Runs on its own thread while this candidate leads; must return once `stop` is requested.
  std::function<void(std::stop_token stop)> on_started_leading;
  // Called after leadership ended (lost, or stopped) and on_started_leading returned.
  std::function<void()> on_stopped_leading;
  // Called whenever a different holder (possibly this one) is observed.
  std::function<void(const std::string& identity)> on_new_leader;
};

class LeaderElector {
 public:
  // Validates the config: identity and lease name set, 1 s <= lease granularity,
  // lease_duration > renew_deadline > 1.2 * retry_period, callbacks present.
  static StatusOr<std::unique_ptr<LeaderElector>> Create(Client& client, LeaderElectionConfig config);

  // Campaigns until leading, then leads until leadership is lost or `stop` is requested; returns
  // afterwards (a process normally exits then, as client-go's Run does).
  void Run(std::stop_token stop);

  bool IsLeader() const { return leading_.load(); }
  // The last holder observed ("" when none).
  std::string Leader() const;

 private:
  LeaderElector(Client& client, LeaderElectionConfig config);
  // One attempt to acquire or renew; true when this candidate holds the lease afterwards.
  bool TryAcquireOrRenew();
  void Release();
  Json NewLease(const Json& spec) const;

  Client& client_;
  const LeaderElectionConfig config_;
  const ResourceRef lease_ref_;
  std::atomic<bool> leading_{false};

  mutable std::mutex mu_;
  Json observed_spec_;                 // last lease spec seen
  Clock::time_point observed_time_{};  // when observed_spec_ last changed, on our clock
};

// RFC 3339 with microseconds in UTC, the format of a Lease's MicroTime fields.
std::string FormatMicroTime(std::chrono::system_clock::time_point t);

}  // namespace mf::k8s
