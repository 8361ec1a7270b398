// Container probes (httpGet, tcpSocket, exec) and the bookkeeping around them: when a probe is
// due (initialDelaySeconds, periodSeconds) and when results flip the container's state
// (successThreshold, failureThreshold). Readiness and startup start failing and liveness starts
// passing, as in the kubelet; liveness and readiness wait until a startup probe has succeeded.
#pragma once

#include <chrono>
#include <string>

#include "tools/local/kubelet/object_fields.h"
#include "tools/local/kubelet/process.h"

namespace mf::local {

struct ProbeOutcome {
  bool success = false;
  std::string message;  // why it failed, for events and logs
};

struct ProbeTiming {
  std::chrono::seconds initial_delay{0};
  std::chrono::seconds period{10};
  std::chrono::seconds timeout{1};
  int success_threshold = 1;
  int failure_threshold = 3;
};
// Reads the timing fields with Kubernetes' defaults; negative or zero where >= 1 is required is
// INVALID_ARGUMENT.
StatusOr<ProbeTiming> ParseProbeTiming(const Json& probe);

// Runs the probe's action once. `exec_base` carries the container's env and working dir for
// exec probes; its argv is replaced by the probe's command.
ProbeOutcome RunProbe(const Json& probe, const std::string& pod_ip, const Json& container, const SpawnSpec& exec_base,
                      std::chrono::milliseconds timeout);

class ProbeTracker {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  ProbeTracker(ProbeTiming timing, bool initially_healthy) : timing_(timing), healthy_(initially_healthy) {}

  // Whether a probe should run now, for a container that started at `started`.
  bool Due(TimePoint started, TimePoint now) const;
  // Records one result; returns true when the healthy state changed.
  bool Record(bool success, TimePoint now);
  bool healthy() const { return healthy_; }
  // failureThreshold consecutive failures: for a startup probe, the container is restarted.
  bool failed() const { return consecutive_failures_ >= timing_.failure_threshold; }
  const ProbeTiming& timing() const { return timing_; }

 private:
  ProbeTiming timing_;
  bool healthy_;
  int consecutive_successes_ = 0;
  int consecutive_failures_ = 0;
  std::optional<TimePoint> last_run_;
};

}  // namespace mf::local
