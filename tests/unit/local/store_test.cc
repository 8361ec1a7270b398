#include "tools/local/store/store.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "tools/local/store/object_meta.h"

namespace mf::local {
namespace {

using namespace std::chrono_literals;

const GroupVersionResource kNamespaces{"", "v1", "namespaces"};
const GroupVersionResource kConfigMaps{"", "v1", "configmaps"};
const GroupVersionResource kPods{"", "v1", "pods"};
const GroupVersionResource kDeployments{"apps", "v1", "deployments"};
const GroupVersionResource kReplicaSets{"apps", "v1", "replicasets"};

void RegisterTestTypes(Store& store) {
  store.RegisterType({kNamespaces, "Namespace", false, true, [](json& o, const json*) {
                        o["status"]["phase"] = o.contains("metadata") && o["metadata"].contains("deletionTimestamp")
                                                   ? "Terminating" : "Active";
                        return Status::Ok();
                      }});
  store.RegisterType({kConfigMaps, "ConfigMap", true, false, nullptr});
  store.RegisterType({kPods, "Pod", true, true, nullptr});
  store.RegisterType({kDeployments, "Deployment", true, true, [](json& o, const json*) {
                        if (!o["spec"].contains("replicas")) o["spec"]["replicas"] = 1;
                        if (!o["spec"]["replicas"].is_number_integer() || o["spec"]["replicas"].get<int>() < 0) {
                          return InvalidArgument("spec.replicas must be a non-negative integer");
                        }
                        return Status::Ok();
                      }});
  store.RegisterType({kReplicaSets, "ReplicaSet", true, true, nullptr});
}

json Named(const std::string& name, json extra = json::object()) {
  json o = {{"metadata", {{"name", name}}}};
  o.update(extra);
  return o;
}

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override { store_ = OpenStore({}); }

  std::unique_ptr<Store> OpenStore(StoreOptions options) {
    auto store = Store::Open(std::move(options));
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    RegisterTestTypes(**store);
    if (!(*store)->Get({kNamespaces, "", "default"}).ok()) {
      EXPECT_TRUE((*store)->Create(kNamespaces, "", Named("default")).ok());
    }
    return std::move(store).value();
  }

  json MustCreate(const GroupVersionResource& gvr, json object, const std::string& ns = "default") {
    auto created = store_->Create(gvr, ns, std::move(object));
    EXPECT_TRUE(created.ok()) << created.status().ToString();
    return created.ok() ? *created : json();
  }

  static std::vector<WatchEvent> Drain(Watcher& w, size_t n) {
    std::vector<WatchEvent> events;
    while (events.size() < n) {
      auto e = w.Next(2s);
      if (!e) break;
      events.push_back(std::move(*e));
    }
    return events;
  }

  std::unique_ptr<Store> store_;
};

TEST_F(StoreTest, CreateFillsMetadataAndRejectsDuplicatesAndBadNames) {
  json cm = MustCreate(kConfigMaps, Named("c1", {{"data", {{"k", "v"}}}}));
  EXPECT_EQ(cm["apiVersion"], "v1");
  EXPECT_EQ(cm["kind"], "ConfigMap");
  EXPECT_EQ(cm["metadata"]["namespace"], "default");
  EXPECT_EQ(cm["metadata"]["generation"], 1);
  EXPECT_EQ(cm["metadata"]["uid"].get<std::string>().size(), 36u);
  EXPECT_EQ(cm["metadata"]["resourceVersion"], std::to_string(store_->CurrentResourceVersion()));

  uint64_t before = store_->CurrentResourceVersion();
  EXPECT_EQ(store_->Create(kConfigMaps, "default", Named("c1")).status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(store_->Create(kConfigMaps, "default", Named("Bad_Name")).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->Create(kConfigMaps, "nope", Named("c2")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->Create({"", "v1", "widgets"}, "default", Named("w")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->CurrentResourceVersion(), before) << "failed creates must not change anything";

  json generated = MustCreate(kConfigMaps, {{"metadata", {{"generateName", "gen-"}}}});
  EXPECT_TRUE(generated["metadata"]["name"].get<std::string>().starts_with("gen-"));
  EXPECT_EQ(generated["metadata"]["name"].get<std::string>().size(), 9u);
}

TEST_F(StoreTest, MetadataOfTheWrongTypeIsRejected) {
  for (const char* bad : {R"({"metadata":{"name":5}})", R"({"metadata":{"name":"x","labels":{"a":1}}})",
                          R"({"metadata":{"name":"x","finalizers":"f"}})",
                          R"({"metadata":{"name":"x","ownerReferences":[{"uid":7}]}})"}) {
    EXPECT_EQ(store_->Create(kConfigMaps, "default", json::parse(bad)).status().code(), StatusCode::kInvalidArgument) << bad;
  }
  json c = MustCreate(kConfigMaps, Named("c"));
  c["metadata"]["ownerReferences"] = {{{"uid", "u"}}};
  EXPECT_EQ(store_->Update({kConfigMaps, "default", "c"}, c).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(StoreTest, StaleUpdateConflictsAndChangesNothing) {
  json cm = MustCreate(kConfigMaps, Named("c1", {{"data", {{"k", "v1"}}}}));
  json first = cm;
  first["data"]["k"] = "v2";
  auto updated = store_->Update({kConfigMaps, "default", "c1"}, first);
  ASSERT_TRUE(updated.ok()) << updated.status().ToString();
  EXPECT_GT(std::stoull((*updated)["metadata"]["resourceVersion"].get<std::string>()),
            std::stoull(cm["metadata"]["resourceVersion"].get<std::string>()));

  json stale = cm;  // still carries the first resourceVersion
  stale["data"]["k"] = "v3";
  auto conflict = store_->Update({kConfigMaps, "default", "c1"}, stale);
  EXPECT_EQ(conflict.status().code(), StatusCode::kAborted);
  EXPECT_NE(conflict.status().message().find("the object has been modified"), std::string::npos);
  EXPECT_EQ((*store_->Get({kConfigMaps, "default", "c1"}))["data"]["k"], "v2");

  json unconditional = stale;
  unconditional["metadata"].erase("resourceVersion");
  EXPECT_TRUE(store_->Update({kConfigMaps, "default", "c1"}, unconditional).ok());
  EXPECT_EQ((*store_->Get({kConfigMaps, "default", "c1"}))["data"]["k"], "v3");
}

TEST_F(StoreTest, GenerationTracksSpecAndStatusIsASeparateSubresource) {
  json d = MustCreate(kDeployments, Named("d", {{"spec", {{"replicas", 2}}}, {"status", {{"replicas", 99}}}}));
  EXPECT_FALSE(d.contains("status")) << "status is not writable on create";
  EXPECT_EQ(d["metadata"]["generation"], 1);

  json labelled = d;
  labelled["metadata"]["labels"] = {{"a", "b"}};
  labelled["status"] = {{"replicas", 5}};  // ignored on the main resource
  json after_labels = *store_->Update({kDeployments, "default", "d"}, labelled);
  EXPECT_EQ(after_labels["metadata"]["generation"], 1);
  EXPECT_FALSE(after_labels.contains("status"));

  json status_write = after_labels;
  status_write["status"] = {{"replicas", 2}, {"observedGeneration", 1}};
  status_write["spec"]["replicas"] = 7;  // ignored on the status subresource
  json after_status = *store_->Update({kDeployments, "default", "d"}, status_write, Subresource::kStatus);
  EXPECT_EQ(after_status["status"]["replicas"], 2);
  EXPECT_EQ(after_status["spec"]["replicas"], 2);
  EXPECT_EQ(after_status["metadata"]["generation"], 1);

  json scaled = after_status;
  scaled["spec"]["replicas"] = 3;
  json after_scale = *store_->Update({kDeployments, "default", "d"}, scaled);
  EXPECT_EQ(after_scale["metadata"]["generation"], 2);
  EXPECT_EQ(after_scale["status"]["replicas"], 2) << "the main resource keeps the stored status";

  uint64_t rv = store_->CurrentResourceVersion();
  EXPECT_TRUE(store_->Update({kDeployments, "default", "d"}, after_scale).ok());
  EXPECT_EQ(store_->CurrentResourceVersion(), rv) << "a no-op update must not bump resourceVersion";
}

TEST_F(StoreTest, AdmissionDefaultsAndRejectsWithoutSideEffects) {
  json d = MustCreate(kDeployments, Named("d", {{"spec", json::object()}}));
  EXPECT_EQ(d["spec"]["replicas"], 1);
  uint64_t rv = store_->CurrentResourceVersion();
  json bad = d;
  bad["spec"]["replicas"] = -3;
  EXPECT_EQ(store_->Update({kDeployments, "default", "d"}, bad).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->Create(kDeployments, "default", Named("e", {{"spec", {{"replicas", "x"}}}})).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->CurrentResourceVersion(), rv);
  EXPECT_EQ((*store_->Get({kDeployments, "default", "d"}))["spec"]["replicas"], 1);
}

TEST_F(StoreTest, GuaranteedUpdateAbortsOnMutateError) {
  MustCreate(kConfigMaps, Named("c"));
  uint64_t rv = store_->CurrentResourceVersion();
  auto failed = store_->GuaranteedUpdate({kConfigMaps, "default", "c"}, Subresource::kMain,
                                         [](const json&) -> StatusOr<json> { return InvalidArgument("bad patch"); });
  EXPECT_EQ(failed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->CurrentResourceVersion(), rv);
  auto patched = store_->GuaranteedUpdate({kConfigMaps, "default", "c"}, Subresource::kMain, [](const json& cur) -> StatusOr<json> {
    json next = cur;
    next["data"]["x"] = "1";
    return next;
  });
  ASSERT_TRUE(patched.ok());
  EXPECT_EQ((*patched)["data"]["x"], "1");
}

TEST_F(StoreTest, ListFiltersByNamespaceLabelsAndFields) {
  MustCreate(kNamespaces, Named("other"), "");
  MustCreate(kPods, Named("a", {{"metadata", {{"name", "a"}, {"labels", {{"app", "web"}}}}}, {"spec", {{"nodeName", "n1"}}}}));
  MustCreate(kPods, Named("b", {{"metadata", {{"name", "b"}, {"labels", {{"app", "db"}}}}}, {"spec", {{"nodeName", "n1"}}}}));
  MustCreate(kPods, Named("c", {{"metadata", {{"name", "c"}, {"labels", {{"app", "web"}}}}}}), "other");

  auto names = [&](std::string_view ns, ListOptions options) {
    std::vector<std::string> out;
    auto list = store_->List(kPods, ns, options);
    EXPECT_TRUE(list.ok()) << list.status().ToString();
    if (list.ok()) {
      for (const auto& item : list->items) out.push_back(item["metadata"]["name"]);
    }
    return out;
  };
  EXPECT_EQ(names("", {}), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(names("default", {}), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(names("", {"app=web", ""}), (std::vector<std::string>{"a", "c"}));
  EXPECT_EQ(names("", {"app in (web,db)", "spec.nodeName=n1"}), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(names("", {"", "metadata.namespace!=default"}), (std::vector<std::string>{"c"}));
  EXPECT_EQ(store_->List(kPods, "", {"app in (", ""}).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(StoreTest, WatchSeesChangesInCommitOrderAndSelectorTransitions) {
  MustCreate(kConfigMaps, Named("pre", {{"metadata", {{"name", "pre"}, {"labels", {{"w", "yes"}}}}}}));
  auto watch = store_->Watch(kConfigMaps, "default", {{"w=yes", ""}, 0, true, false});
  ASSERT_TRUE(watch.ok());
  json a = MustCreate(kConfigMaps, {{"metadata", {{"name", "a"}, {"labels", {{"w", "yes"}}}}}});
  MustCreate(kConfigMaps, Named("ignored"));
  a["metadata"]["labels"]["w"] = "no";  // leaves the selection: DELETED for this watcher
  a = *store_->Update({kConfigMaps, "default", "a"}, a);
  a["metadata"]["labels"]["w"] = "yes";  // comes back: ADDED
  a = *store_->Update({kConfigMaps, "default", "a"}, a);
  a["data"] = {{"k", "v"}};
  a = *store_->Update({kConfigMaps, "default", "a"}, a);
  ASSERT_TRUE(store_->Delete({kConfigMaps, "default", "a"}).ok());

  auto events = Drain(**watch, 6);
  ASSERT_EQ(events.size(), 6u);
  std::vector<std::string> seen;
  uint64_t last = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    seen.push_back(std::string(WatchEventTypeName(events[i].type)) + ":" + events[i].object["metadata"]["name"].get<std::string>());
    if (i > 0) {
      EXPECT_GT(events[i].resource_version, last) << "events must arrive in commit order";
    }
    last = events[i].resource_version;
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"ADDED:pre", "ADDED:a", "DELETED:a", "ADDED:a", "MODIFIED:a", "DELETED:a"}));
  EXPECT_FALSE((*watch)->Next(50ms).has_value());
}

TEST_F(StoreTest, WatchResumesFromAVersionAndAnswers410WhenTooOld) {
  auto small = OpenStore({.history_limit = 3});
  json c = *small->Create(kConfigMaps, "default", Named("c"));
  uint64_t from = std::stoull(c["metadata"]["resourceVersion"].get<std::string>());
  for (int i = 0; i < 2; ++i) {
    c["data"]["i"] = std::to_string(i);
    c = *small->Update({kConfigMaps, "default", "c"}, c);
  }
  auto resumed = small->Watch(kConfigMaps, "", {{}, from, false, false});
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  auto events = Drain(**resumed, 2);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].type, WatchEventType::kModified);
  EXPECT_EQ(events[0].object["data"]["i"], "0");
  EXPECT_EQ(events[1].object["data"]["i"], "1");

  for (int i = 2; i < 6; ++i) {
    c["data"]["i"] = std::to_string(i);
    c = *small->Update({kConfigMaps, "default", "c"}, c);
  }
  auto too_old = small->Watch(kConfigMaps, "", {{}, from, false, false});
  EXPECT_EQ(too_old.status().code(), StatusCode::kOutOfRange);
  EXPECT_TRUE(IsResourceVersionTooOld(too_old.status()));
}

TEST_F(StoreTest, BookmarksCarryTheLatestVersionOnceDrained) {
  auto watch = store_->Watch(kPods, "default", {{}, store_->CurrentResourceVersion(), false, true});
  ASSERT_TRUE(watch.ok());
  MustCreate(kConfigMaps, Named("unrelated"));
  auto bookmark = (*watch)->Next(20ms);
  ASSERT_TRUE(bookmark.has_value());
  EXPECT_EQ(bookmark->type, WatchEventType::kBookmark);
  EXPECT_EQ(bookmark->resource_version, store_->CurrentResourceVersion());
  EXPECT_EQ(bookmark->object["kind"], "Pod");
  EXPECT_FALSE((*watch)->Next(20ms).has_value()) << "no second bookmark without progress";
}

TEST_F(StoreTest, SlowWatcherIsEndedWith410) {
  auto small = OpenStore({.max_queued_events_per_watcher = 2});
  auto watch = small->Watch(kConfigMaps, "", {{}, small->CurrentResourceVersion(), false, false});
  ASSERT_TRUE(watch.ok());
  for (int i = 0; i < 4; ++i) small->Create(kConfigMaps, "default", Named("c" + std::to_string(i))).status();
  auto e = (*watch)->Next(1s);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->type, WatchEventType::kError);
  EXPECT_EQ(e->object["code"], 410);
  EXPECT_TRUE((*watch)->done());
}

TEST_F(StoreTest, ConcurrentWritersAreSeenByAWatcherInOneTotalOrder) {
  constexpr int kWriters = 4;
  constexpr int kUpdates = 100;
  auto watch = *store_->Watch(kConfigMaps, "default", {{}, store_->CurrentResourceVersion(), false, false});
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      std::string name = "cm" + std::to_string(w);
      ASSERT_TRUE(store_->Create(kConfigMaps, "default", Named(name)).ok());
      for (int i = 0; i < kUpdates; ++i) {
        auto r = store_->GuaranteedUpdate({kConfigMaps, "default", name}, Subresource::kMain, [&](const json& cur) -> StatusOr<json> {
          json next = cur;
          next["data"]["i"] = std::to_string(i);
          return next;
        });
        ASSERT_TRUE(r.ok()) << r.status().ToString();
      }
    });
  }
  for (auto& t : writers) t.join();
  auto events = Drain(*watch, kWriters * (kUpdates + 1));
  ASSERT_EQ(events.size(), static_cast<size_t>(kWriters * (kUpdates + 1)));
  std::map<std::string, int> last_seen;
  for (size_t i = 1; i < events.size(); ++i) ASSERT_EQ(events[i].resource_version, events[i - 1].resource_version + 1);
  for (const auto& e : events) {
    if (e.type != WatchEventType::kModified) continue;
    int value = std::stoi(e.object["data"]["i"].get<std::string>());
    std::string name = e.object["metadata"]["name"];
    EXPECT_EQ(value, last_seen.contains(name) ? last_seen[name] + 1 : 0) << "per-object order is kept";
    last_seen[name] = value;
  }
  EXPECT_EQ(events.back().resource_version, store_->CurrentResourceVersion());
}

TEST_F(StoreTest, StopWakesABlockedNext) {
  auto watch = *store_->Watch(kPods, "", {{}, 0, true, false});
  std::thread stopper([&] {
    std::this_thread::sleep_for(50ms);
    watch->Stop();
  });
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(watch->Next(10s).has_value());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_TRUE(watch->done());
  stopper.join();
}

TEST_F(StoreTest, FinalizersDelayRemovalUntilEmptied) {
  MustCreate(kConfigMaps, Named("f", {{"metadata", {{"name", "f"}, {"finalizers", {"example.com/hold"}}}}}));
  auto deleted = store_->Delete({kConfigMaps, "default", "f"});
  ASSERT_TRUE(deleted.ok());
  EXPECT_TRUE((*deleted)["metadata"].contains("deletionTimestamp"));
  json held = *store_->Get({kConfigMaps, "default", "f"});
  EXPECT_TRUE(held["metadata"].contains("deletionTimestamp"));

  json add = held;
  add["metadata"]["finalizers"].push_back("example.com/more");
  EXPECT_EQ(store_->Update({kConfigMaps, "default", "f"}, add).status().code(), StatusCode::kPermissionDenied);

  held["metadata"]["finalizers"] = json::array();
  ASSERT_TRUE(store_->Update({kConfigMaps, "default", "f"}, held).ok());
  EXPECT_EQ(store_->Get({kConfigMaps, "default", "f"}).status().code(), StatusCode::kNotFound);
}

class GarbageCollectionTest : public StoreTest {
 protected:
  // deployment -> replicaset -> two pods, like the deployment controller builds.
  void BuildChain() {
    deployment_ = MustCreate(kDeployments, Named("d", {{"spec", {{"replicas", 2}}}}));
    replicaset_ = MustCreate(kReplicaSets, Named("rs", {{"metadata", {{"name", "rs"}, {"ownerReferences", {OwnerRef(deployment_)}}}}}));
    for (const char* name : {"p1", "p2"}) {
      MustCreate(kPods, {{"metadata", {{"name", name}, {"ownerReferences", {OwnerRef(replicaset_)}}}}});
    }
  }
  static json OwnerRef(const json& owner) {
    return {{"apiVersion", owner["apiVersion"]}, {"kind", owner["kind"]}, {"name", owner["metadata"]["name"]},
            {"uid", owner["metadata"]["uid"]}, {"controller", true}, {"blockOwnerDeletion", true}};
  }
  size_t Count(const GroupVersionResource& gvr) { return store_->List(gvr, "default")->items.size(); }

  json deployment_;
  json replicaset_;
};

TEST_F(GarbageCollectionTest, BackgroundDeletesTheWholeChain) {
  BuildChain();
  ASSERT_TRUE(store_->Delete({kDeployments, "default", "d"}, {PropagationPolicy::kBackground}).ok());
  EXPECT_EQ(Count(kDeployments), 0u);
  EXPECT_EQ(Count(kReplicaSets), 0u);
  EXPECT_EQ(Count(kPods), 0u);
}

TEST_F(GarbageCollectionTest, ForegroundKeepsTheOwnerUntilDependentsAreGone) {
  BuildChain();
  json p1 = *store_->Get({kPods, "default", "p1"});
  p1["metadata"]["finalizers"] = {"example.com/drain"};
  p1 = *store_->Update({kPods, "default", "p1"}, p1);

  auto deleted = store_->Delete({kDeployments, "default", "d"}, {PropagationPolicy::kForeground});
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  json d = *store_->Get({kDeployments, "default", "d"});
  EXPECT_TRUE(d["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ(d["metadata"]["finalizers"], json({"foregroundDeletion"}));
  EXPECT_EQ(Count(kPods), 1u) << "p2 is gone, p1 waits on its finalizer";
  EXPECT_EQ(Count(kReplicaSets), 1u);

  p1 = *store_->Get({kPods, "default", "p1"});
  p1["metadata"]["finalizers"] = json::array();
  ASSERT_TRUE(store_->Update({kPods, "default", "p1"}, p1).ok());
  EXPECT_EQ(Count(kPods), 0u);
  EXPECT_EQ(Count(kReplicaSets), 0u);
  EXPECT_EQ(Count(kDeployments), 0u);
}

TEST_F(GarbageCollectionTest, OrphanKeepsDependentsAndDropsTheirOwnerReference) {
  BuildChain();
  ASSERT_TRUE(store_->Delete({kDeployments, "default", "d"}, {PropagationPolicy::kOrphan}).ok());
  EXPECT_EQ(Count(kDeployments), 0u);
  json rs = *store_->Get({kReplicaSets, "default", "rs"});
  EXPECT_FALSE(rs["metadata"].contains("ownerReferences"));
  EXPECT_EQ(Count(kPods), 2u);
}

TEST_F(GarbageCollectionTest, DependentWithAnotherLiveOwnerSurvives) {
  BuildChain();
  json other = MustCreate(kConfigMaps, Named("owner2"));
  json p1 = *store_->Get({kPods, "default", "p1"});
  p1["metadata"]["ownerReferences"].push_back(OwnerRef(other));
  ASSERT_TRUE(store_->Update({kPods, "default", "p1"}, p1).ok());
  ASSERT_TRUE(store_->Delete({kReplicaSets, "default", "rs"}).ok());
  EXPECT_TRUE(store_->Get({kPods, "default", "p1"}).ok());
  EXPECT_FALSE(store_->Get({kPods, "default", "p2"}).ok());
}

TEST_F(StoreTest, DeletingANamespaceDeletesItsContents) {
  MustCreate(kNamespaces, Named("team"), "");
  MustCreate(kConfigMaps, Named("c"), "team");
  MustCreate(kPods, Named("p"), "team");
  ASSERT_TRUE(store_->Delete({kNamespaces, "", "team"}).ok());
  EXPECT_EQ(store_->Get({kNamespaces, "", "team"}).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(store_->List(kConfigMaps, "team")->items.empty());
  EXPECT_TRUE(store_->Get({kConfigMaps, "default", "c"}).status().code() == StatusCode::kNotFound);
}

TEST_F(StoreTest, DeletePreconditionsConflict) {
  json c = MustCreate(kConfigMaps, Named("c"));
  DeleteOptions wrong_uid;
  wrong_uid.precondition_uid = "nope";
  EXPECT_EQ(store_->Delete({kConfigMaps, "default", "c"}, wrong_uid).status().code(), StatusCode::kAborted);
  DeleteOptions right;
  right.precondition_resource_version = c["metadata"]["resourceVersion"].get<std::string>();
  EXPECT_TRUE(store_->Delete({kConfigMaps, "default", "c"}, right).ok());
}

TEST_F(StoreTest, DryRunChecksEverythingAndStoresNothing) {
  WriteOptions dry{.dry_run = true};
  uint64_t rv = store_->CurrentResourceVersion();
  auto watch = *store_->Watch(kDeployments, "", {{}, rv, false, false});
  auto preview = store_->Create(kDeployments, "default", Named("d", {{"spec", json::object()}}), dry);
  ASSERT_TRUE(preview.ok());
  EXPECT_EQ((*preview)["spec"]["replicas"], 1) << "admission ran";
  EXPECT_EQ(store_->Get({kDeployments, "default", "d"}).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->Create(kDeployments, "default", Named("e", {{"spec", {{"replicas", -1}}}}), dry).status().code(),
            StatusCode::kInvalidArgument);

  json d = MustCreate(kDeployments, Named("d", {{"spec", {{"replicas", 1}}}}));
  rv = store_->CurrentResourceVersion();
  json changed = d;
  changed["spec"]["replicas"] = 9;
  auto update = store_->Update({kDeployments, "default", "d"}, changed, Subresource::kMain, dry);
  ASSERT_TRUE(update.ok());
  EXPECT_EQ((*update)["spec"]["replicas"], 9);
  EXPECT_EQ((*update)["metadata"]["generation"], 2);
  DeleteOptions dry_delete;
  dry_delete.dry_run = true;
  ASSERT_TRUE(store_->Delete({kDeployments, "default", "d"}, dry_delete).ok());
  EXPECT_EQ(store_->CurrentResourceVersion(), rv);
  EXPECT_EQ((*store_->Get({kDeployments, "default", "d"}))["spec"]["replicas"], 1);
  auto first = watch->Next(50ms);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->type, WatchEventType::kAdded) << "only the real create reached the watcher";
  EXPECT_FALSE(watch->Next(50ms).has_value());
}

TEST_F(GarbageCollectionTest, ForegroundDeleteOfAnOwnerReferenceCycleTerminates) {
  json a = MustCreate(kConfigMaps, Named("a"));
  json b = MustCreate(kConfigMaps, Named("b", {{"metadata", {{"name", "b"}, {"ownerReferences", {OwnerRef(a)}}}}}));
  a["metadata"]["ownerReferences"] = {OwnerRef(b)};
  ASSERT_TRUE(store_->Update({kConfigMaps, "default", "a"}, a).ok());
  ASSERT_TRUE(store_->Delete({kConfigMaps, "default", "a"}, {PropagationPolicy::kForeground}).ok());
  // Each waits for the other, as in Kubernetes; both are marked and neither is gone yet.
  EXPECT_TRUE(IsBeingDeleted(*store_->Get({kConfigMaps, "default", "a"})));
  EXPECT_TRUE(IsBeingDeleted(*store_->Get({kConfigMaps, "default", "b"})));
  // Removing a's finalizer removes a, which frees b.
  json cleared = *store_->Get({kConfigMaps, "default", "a"});
  cleared["metadata"].erase("finalizers");
  ASSERT_TRUE(store_->Update({kConfigMaps, "default", "a"}, cleared).ok());
  EXPECT_TRUE(store_->List(kConfigMaps, "default")->items.empty());
}

class PersistentStoreTest : public StoreTest {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("mf-local-store-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(PersistentStoreTest, RestartKeepsObjectsVersionsAndWatchHistory) {
  uint64_t resume_from = 0;
  uint64_t last_rv = 0;
  {
    store_ = OpenStore({.data_dir = dir_});
    json c = MustCreate(kConfigMaps, Named("c", {{"data", {{"v", "0"}}}}));
    resume_from = std::stoull(c["metadata"]["resourceVersion"].get<std::string>());
    c["data"]["v"] = "1";
    c = *store_->Update({kConfigMaps, "default", "c"}, c);
    MustCreate(kConfigMaps, Named("gone"));
    ASSERT_TRUE(store_->Delete({kConfigMaps, "default", "gone"}).ok());
    last_rv = store_->CurrentResourceVersion();
    store_.reset();
  }
  store_ = OpenStore({.data_dir = dir_});
  EXPECT_EQ(store_->CurrentResourceVersion(), last_rv);
  json c = *store_->Get({kConfigMaps, "default", "c"});
  EXPECT_EQ(c["data"]["v"], "1");
  EXPECT_FALSE(store_->Get({kConfigMaps, "default", "gone"}).ok());

  auto watch = store_->Watch(kConfigMaps, "default", {{}, resume_from, false, false});
  ASSERT_TRUE(watch.ok()) << watch.status().ToString();
  auto events = Drain(**watch, 3);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].type, WatchEventType::kModified);
  EXPECT_EQ(events[1].type, WatchEventType::kAdded);
  EXPECT_EQ(events[2].type, WatchEventType::kDeleted);
  json next = MustCreate(kConfigMaps, Named("after"));
  EXPECT_EQ(next["metadata"]["resourceVersion"], std::to_string(last_rv + 1));
}

TEST_F(PersistentStoreTest, CompactionAndATornLogTailLoseNothingCommitted) {
  {
    store_ = OpenStore({.data_dir = dir_, .compact_after_records = 4});
    for (int i = 0; i < 10; ++i) MustCreate(kConfigMaps, Named("c" + std::to_string(i)));
    store_.reset();
  }
  {
    std::ofstream wal(dir_ / "wal.jsonl", std::ios::app);
    wal << R"({"rv":999,"type":"ADDED","gvr")";  // a crash mid-write
  }
  store_ = OpenStore({.data_dir = dir_, .compact_after_records = 4});
  EXPECT_EQ(store_->List(kConfigMaps, "default")->items.size(), 10u);
  MustCreate(kConfigMaps, Named("c10"));
  store_.reset();
  store_ = OpenStore({.data_dir = dir_});
  EXPECT_EQ(store_->List(kConfigMaps, "default")->items.size(), 11u);
}

TEST_F(PersistentStoreTest, CorruptSnapshotIsReportedNotIgnored) {
  std::filesystem::create_directories(dir_);
  std::ofstream(dir_ / "snapshot.json") << "{not json";
  auto store = Store::Open({.data_dir = dir_});
  EXPECT_EQ(store.status().code(), StatusCode::kDataLoss);
}

}  // namespace
}  // namespace mf::local

namespace mf::local {
namespace {

std::vector<std::string> Names(const ObjectList& list) {
  std::vector<std::string> out;
  for (const auto& item : list.items) out.push_back(item["metadata"]["name"]);
  return out;
}

TEST_F(StoreTest, ListPagesFollowKeyOrderAndCountWhatRemains) {
  MustCreate(kNamespaces, Named("other"), "");
  for (const char* name : {"d", "a", "c", "b"}) MustCreate(kConfigMaps, Named(name));
  MustCreate(kConfigMaps, Named("a"), "other");
  ListOptions page{.limit = 2};
  auto first = store_->List(kConfigMaps, "", page);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(Names(*first), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(first->more);
  EXPECT_EQ(first->remaining, 3u);
  page.start_after = std::make_pair(std::string("default"), std::string("b"));
  auto second = store_->List(kConfigMaps, "", page);
  EXPECT_EQ(Names(*second), (std::vector<std::string>{"c", "d"}));
  EXPECT_EQ(second->remaining, 1u);
  page.start_after = std::make_pair(std::string("default"), std::string("d"));
  auto third = store_->List(kConfigMaps, "", page);
  EXPECT_EQ(Names(*third), (std::vector<std::string>{"a"}));  // other/a
  EXPECT_EQ(third->items[0]["metadata"]["namespace"], "other");
  EXPECT_FALSE(third->more);
  EXPECT_EQ(third->remaining, 0u);
  // The limit counts objects that pass the selectors only.
  auto selected = store_->List(kConfigMaps, "default", {.field_selector = "metadata.name!=a", .limit = 2});
  EXPECT_EQ(Names(*selected), (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(selected->remaining, 1u);
}

TEST_F(StoreTest, ListAtAPastVersionUndoesLaterChanges) {
  json a = MustCreate(kConfigMaps, Named("a", {{"data", {{"v", "old"}}}}));
  MustCreate(kConfigMaps, Named("b"));
  MustCreate(kConfigMaps, Named("gone", {{"metadata", {{"name", "gone"}, {"labels", {{"x", "y"}}}}}}));
  const uint64_t then = store_->CurrentResourceVersion();
  a["data"]["v"] = "new";
  ASSERT_TRUE(store_->Update({kConfigMaps, "default", "a"}, a).ok());
  ASSERT_TRUE(store_->Delete({kConfigMaps, "default", "gone"}).ok());
  MustCreate(kConfigMaps, Named("added-later"));

  auto past = store_->List(kConfigMaps, "default", {.at_resource_version = then});
  ASSERT_TRUE(past.ok()) << past.status().ToString();
  EXPECT_EQ(past->resource_version, then);
  EXPECT_EQ(Names(*past), (std::vector<std::string>{"a", "b", "gone"}));
  EXPECT_EQ(past->items[0]["data"]["v"], "old");
  // Selectors apply to the past state.
  auto labelled = store_->List(kConfigMaps, "default", {.label_selector = "x=y", .at_resource_version = then});
  EXPECT_EQ(Names(*labelled), (std::vector<std::string>{"gone"}));
  // A later page of the same past list.
  auto page = store_->List(kConfigMaps, "default",
                           {.limit = 1, .start_after = std::make_pair(std::string("default"), std::string("a")),
                            .at_resource_version = then});
  EXPECT_EQ(Names(*page), (std::vector<std::string>{"b"}));
  EXPECT_EQ(page->remaining, 1u);

  auto latest = store_->List(kConfigMaps, "default");
  EXPECT_EQ(Names(*latest), (std::vector<std::string>{"a", "added-later", "b"}));
  EXPECT_EQ(store_->List(kConfigMaps, "default", {.at_resource_version = store_->CurrentResourceVersion() + 5})
                .status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(StoreTest, ListAtAVersionOlderThanTheHistoryIsTooOld) {
  store_ = OpenStore({.history_limit = 3});
  MustCreate(kConfigMaps, Named("a"));
  const uint64_t then = store_->CurrentResourceVersion();
  for (int i = 0; i < 5; ++i) MustCreate(kConfigMaps, Named("n" + std::to_string(i)));
  auto old = store_->List(kConfigMaps, "default", {.at_resource_version = then});
  EXPECT_TRUE(IsResourceVersionTooOld(old.status())) << old.status().ToString();
}

TEST_F(PersistentStoreTest, ListAtAPastVersionWorksAfterARestart) {
  uint64_t then = 0;
  {
    store_ = OpenStore({.data_dir = dir_});
    json a = MustCreate(kConfigMaps, Named("a", {{"data", {{"v", "old"}}}}));
    then = store_->CurrentResourceVersion();
    a["data"]["v"] = "new";
    ASSERT_TRUE(store_->Update({kConfigMaps, "default", "a"}, a).ok());
    ASSERT_TRUE(store_->Delete({kConfigMaps, "default", "a"}).ok());
    store_.reset();
  }
  // The log records only the new state; the restarted store still knows what each change undid.
  store_ = OpenStore({.data_dir = dir_});
  auto past = store_->List(kConfigMaps, "default", {.at_resource_version = then});
  ASSERT_TRUE(past.ok()) << past.status().ToString();
  ASSERT_EQ(Names(*past), (std::vector<std::string>{"a"}));
  EXPECT_EQ(past->items[0]["data"]["v"], "old");
}

}  // namespace
}  // namespace mf::local
