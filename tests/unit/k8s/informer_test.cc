#include "k8s/informer.h"

#include <gtest/gtest.h>

#include <thread>

#include "tests/unit/k8s/fake_api_server.h"

namespace mf::k8s {
namespace {

using namespace std::chrono_literals;
using testing::FakeApiServer;

constexpr char kPods[] = "/api/v1/pods";

Json Pod(const std::string& name, const std::string& ns = "ml", const std::string& app = "web") {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", ns}, {"labels", {{"app", app}}}}}};
}

std::string Name(const ObjectPtr& o) { return (*o)["metadata"]["name"]; }

// Records notifications as "add a@101", "update a@101->105", "delete a@105".
class Recorder {
 public:
  EventHandlers Handlers() {
    return {
        .on_add = [this](const ObjectPtr& o) { Push("add " + Name(o) + "@" + ResourceVersion(*o)); },
        .on_update =
            [this](const ObjectPtr& old_o, const ObjectPtr& new_o) {
              Push("update " + Name(new_o) + "@" + ResourceVersion(*old_o) + "->" + ResourceVersion(*new_o));
            },
        .on_delete = [this](const ObjectPtr& o) { Push("delete " + Name(o) + "@" + ResourceVersion(*o)); },
    };
  }
  // Waits until `n` notifications arrived (false on timeout).
  bool WaitFor(size_t n, std::chrono::milliseconds timeout = 5s) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return events_.size() >= n; });
  }
  std::vector<std::string> events() {
    std::lock_guard lock(mu_);
    return events_;
  }

 private:
  void Push(std::string e) {
    std::lock_guard lock(mu_);
    events_.push_back(std::move(e));
    cv_.notify_all();
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> events_;
};

class InformerTest : public ::testing::Test {
 protected:
  // Drops only once a watch is open, so every drop really cuts a connection.
  void WaitForWatchThenDrop() {
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (server_->open_watches() == 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(1ms);
    }
    server_->DropWatches();
  }
  InformerOptions PodOptions() {
    InformerOptions o;
    o.collection = {resources::Pods(), "ml", "", ""};
    o.error_backoff_base = 10ms;
    o.error_backoff_cap = 50ms;
    return o;
  }
  std::string Rv(const Json& stored) { return ResourceVersion(stored); }

  std::shared_ptr<FakeApiServer> server_ = std::make_shared<FakeApiServer>();
  Client client_{server_, ClusterConfig{}, ClientOptions{.qps = 0, .backoff_base = 1ms, .backoff_cap = 10ms}};
};

TEST_F(InformerTest, ListThenWatchDeliversEveryChangeOnceInOrder) {
  const std::string a1 = Rv(server_->Put(kPods, Pod("a")));
  const std::string b1 = Rv(server_->Put(kPods, Pod("b")));
  server_->Put(kPods, Pod("elsewhere", "other"));  // other namespace: not ours
  Recorder rec;
  Informer informer(client_, PodOptions());
  informer.AddEventHandlers(rec.Handlers());
  ASSERT_TRUE(informer.Start().ok());
  ASSERT_TRUE(informer.WaitForSync(5s));
  EXPECT_EQ(rec.events(), (std::vector<std::string>{"add a@" + a1, "add b@" + b1}));

  Json a = Pod("a", "ml", "api");
  const std::string a2 = Rv(server_->Put(kPods, a));
  const std::string c1 = Rv(server_->Put(kPods, Pod("c")));
  server_->Remove(kPods, "ml", "b");
  const std::string b_deleted = std::to_string(server_->resource_version());
  const std::string a3 = Rv(server_->Put(kPods, Pod("a", "ml", "web")));
  ASSERT_TRUE(rec.WaitFor(6));
  std::this_thread::sleep_for(50ms);  // nothing further may arrive
  EXPECT_EQ(rec.events(),
            (std::vector<std::string>{"add a@" + a1, "add b@" + b1, "update a@" + a1 + "->" + a2, "add c@" + c1,
                                      "delete b@" + b_deleted, "update a@" + a2 + "->" + a3}));
  EXPECT_EQ(informer.store().Size(), 2u);
  EXPECT_EQ((*informer.store().Get("ml/a"))["metadata"]["labels"]["app"], "web");
  EXPECT_EQ((*informer.store().Get("ml/a"))["kind"], "Pod");
  EXPECT_EQ(informer.stats().lists, 1);
}

TEST_F(InformerTest, ForcedWatchDropLosesAndRepeatsNothing) {
  Recorder rec;
  Informer informer(client_, PodOptions());
  informer.AddEventHandlers(rec.Handlers());
  ASSERT_TRUE(informer.Start().ok());
  ASSERT_TRUE(informer.WaitForSync(5s));
  std::vector<std::string> expected;
  std::map<std::string, std::string> last_rv;
  int drops = 0;
  for (int i = 0; i < 30; ++i) {
    const std::string name = "p" + std::to_string(i % 5);
    const std::string rv = Rv(server_->Put(kPods, Pod(name, "ml", "v" + std::to_string(i))));
    expected.push_back(last_rv.count(name) ? "update " + name + "@" + last_rv[name] + "->" + rv
                                           : "add " + name + "@" + rv);
    last_rv[name] = rv;
    if (i % 7 == 3) {
      // Cut the connection of watch number `drops + 1` (the reflector opens them one at a time).
      const auto deadline = std::chrono::steady_clock::now() + 5s;
      while ((informer.stats().watches != drops + 1 || server_->open_watches() != 1) &&
             std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(1ms);
      }
      server_->DropWatches();
      ++drops;
    }
  }
  ASSERT_TRUE(rec.WaitFor(expected.size()));
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(rec.events(), expected);
  EXPECT_EQ(informer.stats().lists, 1);            // resumed from the last resourceVersion, no relist
  EXPECT_EQ(informer.stats().watches, drops + 1);  // one re-watch per drop
}

TEST_F(InformerTest, GoneAfterCompactionRelistsAndReportsTheDifference) {
  server_->Put(kPods, Pod("unchanged"));
  const std::string m1 = Rv(server_->Put(kPods, Pod("modified")));
  const std::string d1 = Rv(server_->Put(kPods, Pod("deleted")));
  Recorder rec;
  Informer informer(client_, PodOptions());
  informer.AddEventHandlers(rec.Handlers());
  ASSERT_TRUE(informer.Start().ok());
  ASSERT_TRUE(informer.WaitForSync(5s));
  ASSERT_TRUE(rec.WaitFor(3));

  // The informer is cut off while the cluster changes and etcd compacts the history.
  server_->set_unavailable(true);
  WaitForWatchThenDrop();
  server_->Put(kPods, Pod("modified", "ml", "v2"));
  const std::string m3 = Rv(server_->Put(kPods, Pod("modified", "ml", "v3")));
  server_->Remove(kPods, "ml", "deleted");
  const std::string n1 = Rv(server_->Put(kPods, Pod("new")));
  server_->Compact();
  server_->set_unavailable(false);

  ASSERT_TRUE(rec.WaitFor(6));
  std::this_thread::sleep_for(50ms);
  const std::vector<std::string> all = rec.events();
  std::vector<std::string> after(all.begin() + 3, all.end());
  std::sort(after.begin(), after.end());
  // Intermediate states collapse into one update; unchanged objects are not re-announced; the
  // object deleted meanwhile is reported with its last known state.
  EXPECT_EQ(after,
            (std::vector<std::string>{"add new@" + n1, "delete deleted@" + d1, "update modified@" + m1 + "->" + m3}));
  EXPECT_EQ(informer.stats().lists, 2);

  // And the watch resumes from the relist.
  const std::string n2 = Rv(server_->Put(kPods, Pod("new", "ml", "again")));
  ASSERT_TRUE(rec.WaitFor(7));
  EXPECT_EQ(rec.events().back(), "update new@" + n1 + "->" + n2);
}

TEST_F(InformerTest, BookmarkAdvancesTheResumePoint) {
  server_->Put(kPods, Pod("a"));
  Informer informer(client_, PodOptions());
  ASSERT_TRUE(informer.Start().ok());
  ASSERT_TRUE(informer.WaitForSync(5s));
  for (int i = 0; i < 5; ++i) server_->Put("/api/v1/configmaps", Pod("cm" + std::to_string(i)));  // other resource
  const auto open_deadline = std::chrono::steady_clock::now() + 5s;
  while (server_->open_watches() == 0 && std::chrono::steady_clock::now() < open_deadline) {
    std::this_thread::sleep_for(1ms);
  }
  server_->SendBookmarks();
  std::this_thread::sleep_for(200ms);  // let the bookmark arrive
  server_->set_unavailable(true);
  server_->DropWatches();
  server_->Compact();  // history before the bookmark is gone
  server_->set_unavailable(false);
  const int64_t watches = informer.stats().watches;
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (informer.stats().watches < watches + 1 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(5ms);
  }
  std::this_thread::sleep_for(100ms);
  // Resuming from the bookmark's version needs no relist; from the pod's own version it would.
  EXPECT_EQ(informer.stats().lists, 1);
}

TEST_F(InformerTest, IndexesFollowChanges) {
  server_->Put(kPods, Pod("a", "ml", "web"));
  server_->Put(kPods, Pod("b", "ml", "api"));
  Informer informer(client_, PodOptions());
  ASSERT_TRUE(informer.AddIndex("app", [](const Json& o) -> std::vector<std::string> {
    const Json& labels = o["metadata"].value("labels", Json::object());
    if (!labels.contains("app")) return {};
    return {labels["app"].get<std::string>()};
  }));
  Recorder rec;
  informer.AddEventHandlers(rec.Handlers());
  ASSERT_TRUE(informer.Start().ok());
  ASSERT_TRUE(informer.WaitForSync(5s));
  EXPECT_EQ(informer.store().ByIndex("app", "web").size(), 1u);
  EXPECT_EQ(informer.store().ByIndex("namespace", "ml").size(), 2u);
  server_->Put(kPods, Pod("b", "ml", "web"));
  ASSERT_TRUE(rec.WaitFor(3));
  EXPECT_EQ(informer.store().ByIndex("app", "web").size(), 2u);
  EXPECT_TRUE(informer.store().ByIndex("app", "api").empty());
}

TEST_F(InformerTest, TransformTrimsListedAndWatchedObjects) {
  Json big = Pod("a");
  big["spec"] = {{"containers", Json::array({{{"name", "c"}}})}};
  server_->Put(kPods, big);
  InformerOptions options = PodOptions();
  options.transform = [](Json* o) { o->erase("spec"); };
  Informer informer(client_, options);
  Recorder rec;
  informer.AddEventHandlers(rec.Handlers());
  ASSERT_TRUE(informer.Start().ok());
  ASSERT_TRUE(informer.WaitForSync(5s));
  EXPECT_FALSE(informer.store().Get("ml/a")->contains("spec"));
  server_->Put(kPods, big);
  server_->Put(kPods, Pod("b"));
  ASSERT_TRUE(rec.WaitFor(3));
  EXPECT_FALSE(informer.store().Get("ml/a")->contains("spec"));
  EXPECT_EQ((*informer.store().Get("ml/a"))["metadata"]["labels"]["app"], "web");
  EXPECT_TRUE(informer.store().Get("ml/b"));
}

TEST_F(InformerTest, ResyncRedeliversCachedObjects) {
  server_->Put(kPods, Pod("a"));
  InformerOptions options = PodOptions();
  options.resync_period = 30ms;
  Informer informer(client_, options);
  std::atomic<int> resyncs{0};
  informer.AddEventHandlers({.on_update = [&](const ObjectPtr& o, const ObjectPtr& n) {
    if (o == n) ++resyncs;
  }});
  ASSERT_TRUE(informer.Start().ok());
  ASSERT_TRUE(informer.WaitForSync(5s));
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (resyncs.load() < 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
  EXPECT_GE(resyncs.load(), 2);
}

TEST_F(InformerTest, AThrowingHandlerDoesNotStopDelivery) {
  Informer informer(client_, PodOptions());
  Recorder rec;
  informer.AddEventHandlers({.on_add = [](const ObjectPtr& o) {
    if (Name(o) == "bad") throw std::runtime_error("handler bug");
  }});
  informer.AddEventHandlers(rec.Handlers());
  ASSERT_TRUE(informer.Start().ok());
  ASSERT_TRUE(informer.WaitForSync(5s));
  const std::string bad = Rv(server_->Put(kPods, Pod("bad")));
  const std::string good = Rv(server_->Put(kPods, Pod("good")));
  ASSERT_TRUE(rec.WaitFor(2));
  EXPECT_EQ(rec.events(), (std::vector<std::string>{"add bad@" + bad, "add good@" + good}));
}

TEST_F(InformerTest, MalformedObjectsFromTheServerAreSkipped) {
  server_->Put(kPods, Pod("a"));
  Informer informer(client_, PodOptions());
  Recorder rec;
  informer.AddEventHandlers(rec.Handlers());
  ASSERT_TRUE(informer.Start().ok());
  ASSERT_TRUE(informer.WaitForSync(5s));
  // A name that is not a string must not crash the reflector thread.
  server_->Put(kPods, {{"metadata", {{"name", "weird"}, {"namespace", "ml"}, {"labels", 5}}}});
  const std::string b = Rv(server_->Put(kPods, Pod("b")));
  ASSERT_TRUE(rec.WaitFor(3));
  EXPECT_EQ(rec.events().back(), "add b@" + b);
  EXPECT_EQ(ObjectKey(Json{{"metadata", {{"name", 42}}}}), "");
  EXPECT_EQ(ResourceVersion(Json{{"metadata", {{"resourceVersion", 7}}}}), "");
}

TEST_F(InformerTest, RejectsAnObjectRef) {
  InformerOptions options = PodOptions();
  options.collection.name = "a";
  Informer informer(client_, options);
  EXPECT_EQ(informer.Start().code(), StatusCode::kInvalidArgument);
}

TEST_F(InformerTest, StopEndsAnOpenWatchPromptly) {
  Informer informer(client_, PodOptions());
  ASSERT_TRUE(informer.Start().ok());
  ASSERT_TRUE(informer.WaitForSync(5s));
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (server_->open_watches() == 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
  const auto start = std::chrono::steady_clock::now();
  informer.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  EXPECT_EQ(server_->open_watches(), 0);
}

}  // namespace
}  // namespace mf::k8s
