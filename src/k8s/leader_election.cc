#include "k8s/leader_election.h"

#include <cmath>
#include <condition_variable>
#include <ctime>
#include <thread>

#include "common/logging.h"
#include "k8s/api_error.h"

namespace mf::k8s {

namespace {

std::string HolderOf(const Json& spec) {
  return spec.is_object() && spec.contains("holderIdentity") && spec["holderIdentity"].is_string()
             ? spec["holderIdentity"].get<std::string>()
             : "";
}

int64_t IntField(const Json& spec, const char* key, int64_t fallback) {
  return spec.is_object() && spec.contains(key) && spec[key].is_number_integer() ? spec[key].get<int64_t>() : fallback;
}

int LeaseSeconds(std::chrono::milliseconds d) {
  return static_cast<int>(std::ceil(std::chrono::duration<double>(d).count()));
}

}  // namespace

std::string FormatMicroTime(std::chrono::system_clock::time_point t) {
  const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
  const std::time_t seconds = static_cast<std::time_t>(micros / 1'000'000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s.%06dZ", date, static_cast<int>(micros % 1'000'000));
  return buf;
}

StatusOr<std::unique_ptr<LeaderElector>> LeaderElector::Create(Client& client, LeaderElectionConfig config) {
  if (config.identity.empty()) return InvalidArgument("leader election needs a candidate identity");
  if (config.lease_name.empty()) return InvalidArgument("leader election needs a lease name");
  if (config.lease_namespace.empty()) config.lease_namespace = client.default_namespace();
  MF_RETURN_IF_ERROR((ResourceRef{resources::Leases(), config.lease_namespace, config.lease_name, ""}).Path().status());
  if (config.lease_duration < std::chrono::seconds(1)) {
    return InvalidArgument("lease duration must be at least 1s (a Lease counts whole seconds)");
  }
  if (config.lease_duration <= config.renew_deadline) {
    return InvalidArgument("lease duration must be greater than the renew deadline");
  }
  if (config.renew_deadline.count() <= 1.2 * static_cast<double>(config.retry_period.count())) {
    return InvalidArgument("renew deadline must be greater than 1.2 x the retry period");
  }
  if (config.retry_period.count() <= 0) return InvalidArgument("retry period must be positive");
  if (!config.on_started_leading || !config.on_stopped_leading) {
    return InvalidArgument("leader election needs on_started_leading and on_stopped_leading callbacks");
  }
  return std::unique_ptr<LeaderElector>(new LeaderElector(client, std::move(config)));
}

LeaderElector::LeaderElector(Client& client, LeaderElectionConfig config)
    : client_(client),
      config_(std::move(config)),
      lease_ref_{resources::Leases(), config_.lease_namespace, config_.lease_name, ""} {}

std::string LeaderElector::Leader() const {
  std::lock_guard lock(mu_);
  return HolderOf(observed_spec_);
}

Json LeaderElector::NewLease(const Json& spec) const {
  return Json{{"apiVersion", "coordination.k8s.io/v1"},
              {"kind", "Lease"},
              {"metadata", {{"name", config_.lease_name}, {"namespace", config_.lease_namespace}}},
              {"spec", spec}};
}

bool LeaderElector::TryAcquireOrRenew() {
  const auto wall_now = FormatMicroTime(std::chrono::system_clock::now());
  const int lease_seconds = LeaseSeconds(config_.lease_duration);
  StatusOr<Json> current = client_.Get(lease_ref_);
  if (!current.ok() && IsNotFound(current.status())) {
    const Json spec = {{"holderIdentity", config_.identity},
                       {"leaseDurationSeconds", lease_seconds},
                       {"acquireTime", wall_now},
                       {"renewTime", wall_now},
                       {"leaseTransitions", 0}};
    StatusOr<Json> created = client_.Create(lease_ref_, NewLease(spec));
    if (!created.ok()) {
      log::Info("lease create failed", {{"lease", config_.lease_name}, {"error", created.status().message()}});
      return false;
    }
    {
      std::lock_guard lock(mu_);
      observed_spec_ = spec;
      observed_time_ = Clock::now();
    }
    if (config_.on_new_leader) config_.on_new_leader(config_.identity);
    return true;
  }
  if (!current.ok()) {
    log::Warning("lease read failed", {{"lease", config_.lease_name}, {"error", current.status().message()}});
    return false;
  }
  if (!current->is_object()) {
    log::Warning("lease read returned a non-object", {{"lease", config_.lease_name}});
    return false;
  }
  const Json spec = current->contains("spec") && (*current)["spec"].is_object() ? (*current)["spec"] : Json::object();
  const std::string holder = HolderOf(spec);
  bool new_leader = false;
  bool held_by_other = false;
  {
    std::lock_guard lock(mu_);
    if (spec != observed_spec_) {
      // Any change of the record restarts the expiry clock, measured on our own clock.
      new_leader = holder != HolderOf(observed_spec_);
      observed_spec_ = spec;
      observed_time_ = Clock::now();
    }
    const auto expiry = observed_time_ + std::chrono::seconds(IntField(spec, "leaseDurationSeconds", lease_seconds));
    held_by_other = !holder.empty() && holder != config_.identity && Clock::now() < expiry;
  }
  if (held_by_other) {
    // Callbacks run without the lock, so they may call Leader().
    if (new_leader && config_.on_new_leader) config_.on_new_leader(holder);
    return false;
  }
  Json next = spec;
  const bool renewing = holder == config_.identity;
  next["holderIdentity"] = config_.identity;
  next["leaseDurationSeconds"] = lease_seconds;
  next["renewTime"] = wall_now;
  if (!renewing) {
    next["acquireTime"] = wall_now;
    next["leaseTransitions"] = IntField(spec, "leaseTransitions", 0) + 1;
  }
  Json object = *current;
  object["spec"] = next;
  StatusOr<Json> updated = client_.Update(lease_ref_, object);  // CAS on metadata.resourceVersion
  if (!updated.ok()) {
    if (!IsConflict(updated.status())) {
      log::Warning("lease update failed", {{"lease", config_.lease_name}, {"error", updated.status().message()}});
    }
    return false;
  }
  {
    std::lock_guard lock(mu_);
    observed_spec_ = next;
    observed_time_ = Clock::now();
  }
  if (!renewing && config_.on_new_leader) config_.on_new_leader(config_.identity);
  return true;
}

void LeaderElector::Release() {
  StatusOr<Json> current = client_.Get(lease_ref_);
  if (!current.ok() || !current->is_object() || !current->contains("spec") ||
      HolderOf((*current)["spec"]) != config_.identity) {
    return;
  }
  Json object = *current;
  const auto wall_now = FormatMicroTime(std::chrono::system_clock::now());
  object["spec"]["holderIdentity"] = "";
  object["spec"]["leaseDurationSeconds"] = 1;
  object["spec"]["renewTime"] = wall_now;
  object["spec"]["acquireTime"] = wall_now;
  if (StatusOr<Json> s = client_.Update(lease_ref_, object); !s.ok()) {
    log::Warning("lease release failed", {{"lease", config_.lease_name}, {"error", s.status().message()}});
  }
}

void LeaderElector::Run(std::stop_token stop) {
  // Campaign. Retries are jittered (up to +20%) so candidates started together spread out.
  uint64_t jitter_state = std::hash<std::string>{}(config_.identity);
  const auto jittered = [&] {
    jitter_state = jitter_state * 6364136223846793005ULL + 1442695040888963407ULL;
    const double factor = 1.0 + 0.2 * static_cast<double>(jitter_state >> 40) / static_cast<double>(1ULL << 24);
    return std::chrono::duration_cast<Clock::duration>(config_.retry_period * factor);
  };
  while (!TryAcquireOrRenew()) {
    if (!SleepFor(jittered(), stop)) return;
  }
  leading_ = true;
  log::Info("became leader", {{"lease", config_.lease_name}, {"identity", config_.identity}});
  std::stop_source leading_stop;
  std::thread leader_thread([this, token = leading_stop.get_token()] { config_.on_started_leading(token); });

  // Renew until a renewal has failed for longer than the renew deadline, or we are stopped.
  Clock::time_point last_renew = Clock::now();
  while (SleepFor(config_.retry_period, stop)) {
    if (TryAcquireOrRenew()) {
      last_renew = Clock::now();
    } else if (Clock::now() - last_renew > config_.renew_deadline) {
      log::Warning("lost leadership: could not renew the lease within the renew deadline",
                   {{"lease", config_.lease_name}, {"identity", config_.identity}});
      break;
    }
  }
  leading_ = false;
  leading_stop.request_stop();
  leader_thread.join();
  if (stop.stop_requested() && config_.release_on_cancel) Release();
  config_.on_stopped_leading();
}

}  // namespace mf::k8s
