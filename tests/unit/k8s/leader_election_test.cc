#include "k8s/leader_election.h"

#include <gtest/gtest.h>

#include <thread>

#include "tests/unit/k8s/fake_api_server.h"

namespace mf::k8s {
namespace {

using namespace std::chrono_literals;
using testing::FakeApiServer;

constexpr char kLeases[] = "/apis/coordination.k8s.io/v1/leases";
constexpr auto kLease = 1000ms;
constexpr auto kRenew = 500ms;
constexpr auto kRetry = 100ms;

template <typename Pred>
bool Eventually(Pred pred, std::chrono::milliseconds timeout = 5000ms) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return pred();
}

// One candidate running LeaderElector::Run on its own thread, as a replica of the operator would.
class Candidate {
 public:
  Candidate(Client& client, const std::string& identity, bool release_on_cancel, std::atomic<int>* leaders = nullptr)
      : leaders_(leaders) {
    LeaderElectionConfig config;
    config.lease_namespace = "ml";
    config.lease_name = "modelfleet-operator";
    config.identity = identity;
    config.lease_duration = kLease;
    config.renew_deadline = kRenew;
    config.retry_period = kRetry;
    config.release_on_cancel = release_on_cancel;
    config.on_started_leading = [this](std::stop_token stop) {
      ++started_;
      if (leaders_ && ++*leaders_ > 1) ++overlaps_;
      std::mutex m;
      std::condition_variable_any cv;
      std::unique_lock lock(m);
      cv.wait(lock, stop, [] { return false; });
      if (leaders_) --*leaders_;
    };
    config.on_stopped_leading = [this] { ++stopped_; };
    config.on_new_leader = [this](const std::string& leader) {
      EXPECT_EQ(elector_->Leader(), leader);  // callable from the callback (no lock held)
      std::lock_guard lock(mu_);
      leaders_seen_.push_back(leader);
    };
    auto elector = LeaderElector::Create(client, std::move(config));
    EXPECT_TRUE(elector.ok()) << elector.status().ToString();
    elector_ = std::move(*elector);
    thread_ = std::jthread([this](std::stop_token stop) {
      elector_->Run(stop);
      returned_ = true;
    });
  }
  ~Candidate() { Kill(); }
  // Stops the candidate; with release_on_cancel=false this is what a crashed process looks like
  // to the others: the lease simply stops being renewed.
  void Kill() {
    thread_.request_stop();
    if (thread_.joinable()) thread_.join();
  }
  bool leading() const { return elector_->IsLeader(); }
  int started() const { return started_.load(); }
  int stopped() const { return stopped_.load(); }
  bool returned() const { return returned_.load(); }
  int overlaps() const { return overlaps_.load(); }
  std::vector<std::string> leaders_seen() {
    std::lock_guard lock(mu_);
    return leaders_seen_;
  }

 private:
  std::atomic<int>* leaders_;
  std::atomic<int> started_{0}, stopped_{0}, overlaps_{0};
  std::atomic<bool> returned_{false};
  std::mutex mu_;
  std::vector<std::string> leaders_seen_;
  std::unique_ptr<LeaderElector> elector_;
  std::jthread thread_;
};

class LeaderElectionTest : public ::testing::Test {
 protected:
  nlohmann::json LeaseSpec() { return server_->Object(kLeases, "ml", "modelfleet-operator").value()["spec"]; }
  std::shared_ptr<FakeApiServer> server_ = std::make_shared<FakeApiServer>();
  Client client_{
      server_, ClusterConfig{},
      ClientOptions{.qps = 0, .max_retries = 1, .backoff_base = 1ms, .backoff_cap = 5ms, .request_timeout = 1000ms}};
};

TEST_F(LeaderElectionTest, AcquiresRenewsAndReleasesOnStop) {
  Candidate a(client_, "a", /*release_on_cancel=*/true);
  ASSERT_TRUE(Eventually([&] { return a.leading(); }));
  // on_started_leading runs on its own thread, started just after leading() turns true.
  EXPECT_TRUE(Eventually([&] { return a.started() == 1; }));
  nlohmann::json spec = LeaseSpec();
  EXPECT_EQ(spec["holderIdentity"], "a");
  EXPECT_EQ(spec["leaseDurationSeconds"], 1);
  EXPECT_EQ(spec["leaseTransitions"], 0);
  const std::string renewed = spec["renewTime"];
  EXPECT_EQ(renewed.size(), std::string("2026-11-22T20:00:00.000000Z").size());
  ASSERT_TRUE(Eventually([&] { return LeaseSpec()["renewTime"] != renewed; }));
  EXPECT_EQ(LeaseSpec()["acquireTime"], spec["acquireTime"]);  // renewal keeps the acquire time

  a.Kill();
  EXPECT_TRUE(a.returned());
  EXPECT_EQ(a.stopped(), 1);
  EXPECT_FALSE(a.leading());
  EXPECT_EQ(LeaseSpec()["holderIdentity"], "");  // released
}

TEST_F(LeaderElectionTest, NeverTwoLeadersAtOnce) {
  std::atomic<int> leaders{0};
  std::vector<std::unique_ptr<Candidate>> candidates;
  for (const char* id : {"a", "b", "c"}) {
    candidates.push_back(std::make_unique<Candidate>(client_, id, true, &leaders));
  }
  ASSERT_TRUE(Eventually([&] { return leaders.load() == 1; }));
  std::this_thread::sleep_for(3 * kLease / 2);  // several renew rounds with everyone campaigning
  int leading = 0, overlaps = 0;
  for (auto& c : candidates) {
    leading += c->leading();
    overlaps += c->overlaps();
  }
  EXPECT_EQ(leading, 1);
  EXPECT_EQ(overlaps, 0);
  EXPECT_EQ(LeaseSpec()["leaseTransitions"], 0);  // the first leader kept it
}

TEST_F(LeaderElectionTest, KilledLeaderIsReplacedWithinTheLeaseDuration) {
  auto a = std::make_unique<Candidate>(client_, "a", /*release_on_cancel=*/false);
  ASSERT_TRUE(Eventually([&] { return a->leading(); }));
  Candidate b(client_, "b", true);
  std::this_thread::sleep_for(3 * kRetry);  // b is campaigning and has observed a's renewals
  EXPECT_FALSE(b.leading());

  const auto killed = std::chrono::steady_clock::now();
  a->Kill();  // no release: to b the leader just went silent
  EXPECT_EQ(LeaseSpec()["holderIdentity"], "a");
  ASSERT_TRUE(Eventually([&] { return b.leading(); }, 5000ms));
  const auto handover = std::chrono::steady_clock::now() - killed;
  // b waits out the lease measured from its last sight of a renewal (at most one jittered retry
  // before the kill), then needs at most one more jittered retry to notice.
  EXPECT_LE(handover, kLease + 3 * kRetry);
  EXPECT_GE(handover, kLease - 3 * kRetry);  // and never steals a live lease early
  EXPECT_EQ(LeaseSpec()["holderIdentity"], "b");
  EXPECT_EQ(LeaseSpec()["leaseTransitions"], 1);
  EXPECT_EQ(a->stopped(), 1);
  EXPECT_EQ(b.leaders_seen(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(a->leaders_seen(), (std::vector<std::string>{"a"}));
}

TEST_F(LeaderElectionTest, ReleasedLeaseIsTakenWithoutWaitingForExpiry) {
  auto a = std::make_unique<Candidate>(client_, "a", /*release_on_cancel=*/true);
  ASSERT_TRUE(Eventually([&] { return a->leading(); }));
  Candidate b(client_, "b", true);
  std::this_thread::sleep_for(3 * kRetry);
  const auto stopped = std::chrono::steady_clock::now();
  a->Kill();
  ASSERT_TRUE(Eventually([&] { return b.leading(); }));
  EXPECT_LT(std::chrono::steady_clock::now() - stopped, kLease / 2);
}

TEST_F(LeaderElectionTest, LeaderStepsDownWhenItCannotRenew) {
  Candidate a(client_, "a", true);
  ASSERT_TRUE(Eventually([&] { return a.leading(); }));
  const auto cut = std::chrono::steady_clock::now();
  server_->set_unavailable(true);  // partitioned from the API server
  ASSERT_TRUE(Eventually([&] { return a.returned(); }));
  const auto stepped_down = std::chrono::steady_clock::now() - cut;
  // It must give up before anyone else could take the lease (lease duration after its last renewal).
  EXPECT_LT(stepped_down, kLease);
  EXPECT_GE(stepped_down, kRenew - kRetry);
  EXPECT_EQ(a.stopped(), 1);
  EXPECT_FALSE(a.leading());
}

TEST_F(LeaderElectionTest, RejectsInconsistentTimings) {
  const auto make = [&](auto mutate) {
    LeaderElectionConfig c;
    c.lease_name = "l";
    c.identity = "me";
    c.on_started_leading = [](std::stop_token) {};
    c.on_stopped_leading = [] {};
    mutate(c);
    return LeaderElector::Create(client_, c).status();
  };
  EXPECT_TRUE(make([](LeaderElectionConfig&) {}).ok());  // client-go's defaults
  EXPECT_EQ(make([](LeaderElectionConfig& c) { c.identity = ""; }).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(make([](LeaderElectionConfig& c) { c.renew_deadline = c.lease_duration; }).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(make([](LeaderElectionConfig& c) { c.retry_period = c.renew_deadline; }).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(make([](LeaderElectionConfig& c) { c.lease_duration = 500ms; }).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(make([](LeaderElectionConfig& c) { c.on_stopped_leading = nullptr; }).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(make([](LeaderElectionConfig& c) { c.lease_name = "a/b"; }).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(server_->requests().empty());
}

TEST(MicroTimeTest, FormatsRfc3339Micro) {
  const auto t = std::chrono::system_clock::time_point(std::chrono::microseconds(1'795'000'000'123'456));
  EXPECT_EQ(FormatMicroTime(t), "2026-11-18T11:06:40.123456Z");
}

}  // namespace
}  // namespace mf::k8s
