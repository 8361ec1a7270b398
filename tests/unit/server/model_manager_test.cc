#include "server/repository/model_manager.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "fake_loader.h"
#include "manager_fixture.h"
#include "temp_repository.h"

namespace mf::server {
namespace {

using testing::FakeLoader;
using testing::FakeServable;
using testing::TempRepository;

class ModelManagerTest : public testing::ManagerFixture {
 protected:
  void MakeManager(ManagerOptions options = {}) {
    options.retry_initial = std::chrono::milliseconds(50);
    manager_ = std::make_unique<ModelManager>(loader_, options);
    ASSERT_TRUE(manager_->SetModels({Config()}).ok());
  }
  ModelConfig Config() const { return {"m", repo_.base(), VersionPolicy::Latest(1), {{"stable", 1}, {"canary", 2}}}; }
  // Version 1 serving in the resource preserving mode, and a request in flight holding it.
  StatusOr<ServableHandle> ServeVersion1ResourcePreserving() {
    repo_.WriteVersion(1, "ok");
    ManagerOptions options;
    options.swap_mode = SwapMode::kResourcePreserving;
    MakeManager(options);
    Poll2();
    return manager_->GetServable("m", VersionRequest::Latest());
  }
  int64_t LatestVersion() {
    auto handle = manager_->GetServable("m", VersionRequest::Latest());
    EXPECT_TRUE(handle.ok()) << handle.status().ToString();
    return handle.ok() ? handle->version : -1;
  }
};

TEST_F(ModelManagerTest, LoadsOnlyCompleteFiles) {
  repo_.WriteVersion(1, "ok");
  MakeManager();
  manager_->PollOnce();
  EXPECT_EQ(loader_->loads(1), 0) << "a file seen once may still be being written";
  EXPECT_EQ(StatusOf(1).state, VersionState::kStart);
  manager_->PollOnce();
  EXPECT_EQ(loader_->loads(1), 1);
  EXPECT_EQ(LatestVersion(), 1);
  EXPECT_EQ(StatusOf(1).state, VersionState::kAvailable);
  EXPECT_TRUE(manager_->AllModelsAvailable());
}

TEST_F(ModelManagerTest, ALabelResolvesToItsVersionLoadedOrNot) {
  repo_.WriteVersion(1, "ok");
  MakeManager();
  Poll2();
  EXPECT_EQ(manager_->ResolveLabel("m", "stable").value(), 1);
  // canary names version 2, not written yet: status by label asks for version 2 itself.
  EXPECT_EQ(manager_->ResolveLabel("m", "canary").value(), 2);
  EXPECT_EQ(manager_->GetModelStatus("m", 2).status().message(), "Could not find version 2 of model m");
  EXPECT_EQ(manager_->ResolveLabel("m", "nope").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(manager_->ResolveLabel("other", "stable").status().code(), StatusCode::kNotFound);
}

TEST_F(ModelManagerTest, UnknownModelAndVersionErrorsAsTfServing) {
  repo_.WriteVersion(1, "ok");
  MakeManager();
  Poll2();
  auto missing = manager_->GetServable("other", VersionRequest::Latest());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), "Servable not found for request: Latest(other)");
  auto version = manager_->GetServable("m", VersionRequest::Number(7));
  EXPECT_EQ(version.status().message(), "Servable not found for request: Specific(m, 7)");
  auto label = manager_->GetServable("m", VersionRequest::Label("nope"));
  EXPECT_EQ(label.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(manager_->GetModelStatus("other", std::nullopt).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(manager_->GetModelStatus("m", 7).status().message(), "Could not find version 7 of model m");
}

TEST_F(ModelManagerTest, SwapKeepsOldVersionAliveForInFlightRequests) {
  repo_.WriteVersion(1, "ok");
  MakeManager();
  Poll2();
  auto in_flight = manager_->GetServable("m", VersionRequest::Latest());
  ASSERT_TRUE(in_flight.ok());

  repo_.WriteVersion(2, "ok");
  Poll2();
  EXPECT_EQ(LatestVersion(), 2);
  EXPECT_EQ(StatusOf(1).state, VersionState::kUnloading);
  EXPECT_EQ(loader_->live(), 2) << "the in-flight request still holds version 1";
  EXPECT_EQ(manager_->GetServable("m", VersionRequest::Number(1)).status().code(), StatusCode::kNotFound);

  in_flight->servable.reset();
  manager_->PollOnce();
  EXPECT_EQ(loader_->live(), 1);
  auto statuses = manager_->GetModelStatus("m", std::nullopt);
  ASSERT_TRUE(statuses.ok());
  ASSERT_EQ(statuses->size(), 1u) << "version 1 is no longer aspired and was forgotten";
  EXPECT_EQ(statuses->at(0).version, 2);
}

// The hook main uses to hand freed heap back to the OS fires after every load attempt and once
// a swapped-out version's last holder let go, never while a request still holds it.
TEST_F(ModelManagerTest, MemoryReleasedHookFollowsLoadsAndFinishedUnloads) {
  int released = 0;
  ManagerOptions options;
  options.memory_released = [&released] { ++released; };
  repo_.WriteVersion(1, "ok");
  MakeManager(options);
  Poll2();
  EXPECT_EQ(released, 1) << "after loading version 1";
  auto in_flight = manager_->GetServable("m", VersionRequest::Latest());
  ASSERT_TRUE(in_flight.ok());

  repo_.WriteVersion(2, "ok");
  Poll2();
  EXPECT_EQ(released, 2) << "after loading version 2; version 1 is still held";
  manager_->PollOnce();
  EXPECT_EQ(released, 2) << "version 1 is still held by the request";

  in_flight->servable.reset();
  manager_->PollOnce();
  EXPECT_EQ(released, 3) << "version 1's unload finished";
  manager_->PollOnce();
  EXPECT_EQ(released, 3) << "nothing new was released";

  repo_.WriteVersion(3, "bad file");
  Poll2();
  EXPECT_EQ(released, 4) << "a failed load frees its partial state too";
}

TEST_F(ModelManagerTest, DeletingNewestVersionRollsBack) {
  repo_.WriteVersion(1, "ok");
  repo_.WriteVersion(2, "ok");
  MakeManager();
  Poll2();
  EXPECT_EQ(LatestVersion(), 2);
  EXPECT_EQ(loader_->loads(1), 0);
  repo_.RemoveVersion(2);
  manager_->PollOnce();  // version 1's file has been stable all along: loads now
  EXPECT_EQ(LatestVersion(), 1);
  manager_->PollOnce();
  EXPECT_EQ(manager_->GetModelStatus("m", std::nullopt)->size(), 1u);
}

TEST_F(ModelManagerTest, FailedLoadShowsInStatusAndOldKeepsServingThenRetries) {
  repo_.WriteVersion(1, "ok");
  MakeManager();
  Poll2();
  repo_.WriteVersion(2, "bad: truncated");
  Poll2();
  EXPECT_EQ(LatestVersion(), 1);
  VersionStatus failed = StatusOf(2);
  EXPECT_EQ(failed.state, VersionState::kEnd);
  EXPECT_EQ(failed.status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(failed.status.message().find("malformed"), std::string::npos);

  manager_->PollOnce();
  EXPECT_EQ(loader_->loads(2), 1) << "backoff: no retry right away";
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  manager_->PollOnce();
  EXPECT_EQ(loader_->loads(2), 2) << "retried after the backoff";

  repo_.WriteVersion(2, "ok, complete now");
  Poll2();
  EXPECT_EQ(LatestVersion(), 2);
  EXPECT_TRUE(StatusOf(2).status.ok());
}

TEST_F(ModelManagerTest, AfterMaxLoadRetriesOnlyARewrittenFileIsTriedAgain) {
  repo_.WriteVersion(1, "bad: truncated");
  ManagerOptions options;
  options.max_load_retries = 1;
  MakeManager(options);
  Poll2();
  EXPECT_EQ(loader_->loads(1), 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(70));
  manager_->PollOnce();
  EXPECT_EQ(loader_->loads(1), 2) << "one retry, after the backoff";
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  manager_->PollOnce();
  manager_->PollOnce();
  EXPECT_EQ(loader_->loads(1), 2) << "given up";
  repo_.WriteVersion(1, "ok, complete now");
  Poll2();
  EXPECT_EQ(loader_->loads(1), 3);
  EXPECT_EQ(LatestVersion(), 1);
}

TEST_F(ModelManagerTest, StorageGlitchNeverUnloads) {
  repo_.WriteVersion(3, "ok");
  MakeManager();
  Poll2();
  auto moved = repo_.root() / "moved-away";
  std::filesystem::rename(repo_.base(), moved);
  for (int i = 0; i < 3; ++i) manager_->PollOnce();
  EXPECT_EQ(LatestVersion(), 3);
  VersionStatus during = StatusOf(3);
  EXPECT_EQ(during.state, VersionState::kAvailable);
  EXPECT_EQ(during.status.code(), StatusCode::kNotFound) << "the glitch shows in the status";
  EXPECT_FALSE(manager_->StorageStatus("m").ok());

  std::filesystem::rename(moved, repo_.base());
  manager_->PollOnce();
  EXPECT_EQ(LatestVersion(), 3);
  EXPECT_TRUE(StatusOf(3).status.ok());
  EXPECT_EQ(loader_->loads(3), 1) << "same version, never reloaded";
}

TEST_F(ModelManagerTest, EmptiedBasePathIsTreatedAsAGlitch) {
  repo_.WriteVersion(1, "ok");
  MakeManager();
  Poll2();
  repo_.RemoveVersion(1);
  Poll2();
  EXPECT_EQ(LatestVersion(), 1);
  EXPECT_EQ(StatusOf(1).status.code(), StatusCode::kNotFound);
}

TEST_F(ModelManagerTest, LabelsResolveAndMayPointAtUnloadedVersions) {
  repo_.WriteVersion(1, "ok");
  MakeManager();
  Poll2();
  auto stable = manager_->GetServable("m", VersionRequest::Label("stable"));
  ASSERT_TRUE(stable.ok());
  EXPECT_EQ(stable->version, 1);
  EXPECT_EQ(manager_->GetServable("m", VersionRequest::Label("canary")).status().message(),
            "Servable not found for request: Specific(m, 2)");
}

TEST_F(ModelManagerTest, ResourcePreservingUnloadsBeforeLoading) {
  auto in_flight = ServeVersion1ResourcePreserving();
  ASSERT_TRUE(in_flight.ok());
  repo_.WriteVersion(2, "ok");
  Poll2();
  EXPECT_EQ(loader_->loads(2), 0) << "waits for the in-flight request on version 1";
  EXPECT_EQ(manager_->GetServable("m", VersionRequest::Latest()).status().code(), StatusCode::kNotFound);
  in_flight->servable.reset();
  manager_->PollOnce();
  EXPECT_EQ(LatestVersion(), 2);
  EXPECT_EQ(loader_->max_live_at_load(), 1) << "never two versions in memory";
}

TEST_F(ModelManagerTest, AllPolicyServesEveryVersion) {
  repo_.WriteVersion(1, "ok");
  repo_.WriteVersion(2, "ok");
  MakeManager();
  ModelConfig all = Config();
  all.policy = VersionPolicy::All();
  ASSERT_TRUE(manager_->SetModels({all}).ok());
  Poll2();
  EXPECT_TRUE(manager_->GetServable("m", VersionRequest::Number(1)).ok());
  EXPECT_TRUE(manager_->GetServable("m", VersionRequest::Number(2)).ok());
  EXPECT_EQ(LatestVersion(), 2);
}

TEST_F(ModelManagerTest, ConfigReloadReplacesTheSetAndRefusesBadConfigs) {
  repo_.WriteVersion(1, "ok");
  MakeManager();
  Poll2();
  ModelConfig dup = Config();
  EXPECT_EQ(manager_->SetModels({dup, dup}).status().code(), StatusCode::kInvalidArgument);
  ModelConfig bad = Config();
  bad.policy = VersionPolicy::Latest(0);
  EXPECT_EQ(manager_->SetModels({bad}).status().code(), StatusCode::kInvalidArgument);
  manager_->PollOnce();
  EXPECT_EQ(LatestVersion(), 1) << "refused configs change nothing";

  ASSERT_TRUE(manager_->SetModels({}).ok());
  manager_->PollOnce();
  EXPECT_EQ(manager_->GetServable("m", VersionRequest::Latest()).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(manager_->ModelNames().empty());
}

// Which repository the servable a request gets was loaded from.
std::string LoadedFrom(const StatusOr<ServableHandle>& handle) {
  if (!handle.ok()) return handle.status().ToString();
  return static_cast<const FakeServable&>(*handle->servable).path();
}

// A config that moves a model to another base path keeps the old path's versions serving until
// the new path's are AVAILABLE (no 404 gap), and ReloadConfig's outcome follows the new path.
TEST_F(ModelManagerTest, BasePathChangeServesTheOldPathUntilTheNewOneLoads) {
  repo_.WriteVersion(3, "ok");
  MakeManager();
  Poll2();
  TempRepository moved_to;
  ModelConfig moved = Config();
  moved.base_path = moved_to.base();
  auto generation = manager_->SetModels({moved});
  ASSERT_TRUE(generation.ok());
  EXPECT_EQ(manager_->ConfigOutcome("m", *generation), std::nullopt) << "not applied yet";

  manager_->PollOnce();  // the new path is empty: a storage error, and the old version serves on
  EXPECT_EQ(LatestVersion(), 3);
  EXPECT_TRUE(manager_->AllModelsAvailable());
  auto outcome = manager_->ConfigOutcome("m", *generation);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->code(), StatusCode::kNotFound) << outcome->ToString();

  moved_to.WriteVersion(1, "ok");
  manager_->PollOnce();  // seen once: not yet known complete
  EXPECT_EQ(LoadedFrom(manager_->GetServable("m", VersionRequest::Latest())), repo_.base() + "/3/model.onnx");
  auto in_flight = manager_->GetServable("m", VersionRequest::Latest());
  manager_->PollOnce();
  EXPECT_EQ(LoadedFrom(manager_->GetServable("m", VersionRequest::Latest())), moved_to.base() + "/1/model.onnx");
  EXPECT_EQ(manager_->GetServable("m", VersionRequest::Number(3)).status().code(), StatusCode::kNotFound)
      << "the old path's version no longer takes new requests";
  EXPECT_EQ(manager_->ConfigOutcome("m", *generation), std::optional<Status>(Status::Ok()));
  EXPECT_EQ(StatusOf(3).state, VersionState::kUnloading) << "held by the in-flight request";
  EXPECT_EQ(loader_->live(), 2);

  in_flight = StatusOr<ServableHandle>(NotFound("released"));
  manager_->PollOnce();
  EXPECT_EQ(loader_->live(), 1);
  auto statuses = manager_->GetModelStatus("m", std::nullopt);
  ASSERT_TRUE(statuses.ok());
  ASSERT_EQ(statuses->size(), 1u);
  EXPECT_EQ(statuses->at(0).version, 1);
}

// The same version number on both paths: the old file serves until the new one has loaded.
TEST_F(ModelManagerTest, BasePathChangeWithTheSameVersionNumberHasNoGap) {
  repo_.WriteVersion(1, "ok");
  MakeManager();
  Poll2();
  TempRepository moved_to;
  moved_to.WriteVersion(1, "bad: truncated");
  ModelConfig moved = Config();
  moved.base_path = moved_to.base();
  auto generation = manager_->SetModels({moved});
  ASSERT_TRUE(generation.ok());
  Poll2();
  EXPECT_EQ(LoadedFrom(manager_->GetServable("m", VersionRequest::Number(1))), repo_.base() + "/1/model.onnx")
      << "the new path's version 1 failed to load; the old one keeps serving";
  auto outcome = manager_->ConfigOutcome("m", *generation);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->code(), StatusCode::kInvalidArgument) << outcome->ToString();
  EXPECT_FALSE(StatusOf(1).status.ok()) << "status shows the configured path's failure";

  moved_to.WriteVersion(1, "ok, rewritten");
  Poll2();
  EXPECT_EQ(LoadedFrom(manager_->GetServable("m", VersionRequest::Number(1))), moved_to.base() + "/1/model.onnx");
  EXPECT_EQ(loader_->live(), 1);
}

// Two moves before the first new path served: the original path's version keeps serving.
TEST_F(ModelManagerTest, TwoBasePathChangesInARowKeepTheLastServingPath) {
  repo_.WriteVersion(1, "ok");
  MakeManager();
  Poll2();
  TempRepository second, third;
  ModelConfig moved = Config();
  moved.base_path = second.base();
  ASSERT_TRUE(manager_->SetModels({moved}).ok());
  Poll2();
  moved.base_path = third.base();
  ASSERT_TRUE(manager_->SetModels({moved}).ok());
  Poll2();
  EXPECT_EQ(LoadedFrom(manager_->GetServable("m", VersionRequest::Latest())), repo_.base() + "/1/model.onnx");
  third.WriteVersion(2, "ok");
  Poll2();
  EXPECT_EQ(LoadedFrom(manager_->GetServable("m", VersionRequest::Latest())), third.base() + "/2/model.onnx");
  EXPECT_EQ(loader_->live(), 1) << "the first path's version is gone";
}

TEST_F(ModelManagerTest, BasePathChangeInResourcePreservingModeUnloadsFirst) {
  auto in_flight = ServeVersion1ResourcePreserving();
  ASSERT_TRUE(in_flight.ok());
  TempRepository moved_to;
  moved_to.WriteVersion(2, "ok");
  ModelConfig moved = Config();
  moved.base_path = moved_to.base();
  ASSERT_TRUE(manager_->SetModels({moved}).ok());
  Poll2();
  EXPECT_EQ(loader_->loads(2), 0) << "waits for the in-flight request on the old path's version";
  in_flight = StatusOr<ServableHandle>(NotFound("released"));
  manager_->PollOnce();
  EXPECT_EQ(LatestVersion(), 2);
  EXPECT_EQ(loader_->max_live_at_load(), 1) << "never two versions in memory";
}

// Readiness counts a model a reload adds at once, before the poll that first scans it.
TEST_F(ModelManagerTest, ReadinessCountsAModelAddedByReloadBeforeItsFirstPoll) {
  repo_.WriteVersion(1, "ok");
  MakeManager();
  Poll2();
  ASSERT_TRUE(manager_->AllModelsAvailable());
  TempRepository other;
  other.WriteVersion(1, "ok");
  ModelConfig added{"other", other.base(), VersionPolicy::Latest(1), {}};
  ASSERT_TRUE(manager_->SetModels({Config(), added}).ok());
  EXPECT_FALSE(manager_->AllModelsAvailable());
  Poll2();
  EXPECT_TRUE(manager_->AllModelsAvailable());
  ASSERT_TRUE(manager_->SetModels({added}).ok());
  EXPECT_TRUE(manager_->AllModelsAvailable()) << "a removed model no longer counts";
}

TEST_F(ModelManagerTest, BackgroundLoopLoadsWithoutManualPolls) {
  repo_.WriteVersion(1, "ok");
  ManagerOptions options;
  options.poll_interval = std::chrono::milliseconds(20);
  MakeManager(options);
  manager_->Start();
  for (int i = 0; i < 250 && !manager_->AllModelsAvailable(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(manager_->AllModelsAvailable());
  manager_->Stop();
}

// --file_system_poll_wait_seconds=0 (TF Serving's "poll once"): scanned until the model serves,
// then a new version on disk is not picked up until a config change asks for a scan.
TEST_F(ModelManagerTest, PollOnceStopsScanningOnceServingUntilAConfigChange) {
  repo_.WriteVersion(1, "ok");
  ManagerOptions options;
  options.poll_interval = std::chrono::milliseconds(0);
  options.recheck_interval = std::chrono::milliseconds(10);
  MakeManager(options);
  manager_->Start();
  auto wait_for_version = [this](int64_t version) {
    for (int i = 0; i < 500; ++i) {
      auto handle = manager_->GetServable("m", VersionRequest::Latest());
      if (handle.ok() && handle->version == version) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  };
  ASSERT_TRUE(wait_for_version(1));
  repo_.WriteVersion(2, "ok");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(loader_->loads(2), 0) << "polling is off once the model serves";
  ASSERT_TRUE(manager_->SetModels({Config()}).ok());
  EXPECT_TRUE(wait_for_version(2)) << "a config change scans again";
  manager_->Stop();
}

}  // namespace
}  // namespace mf::server
