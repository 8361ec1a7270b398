#include "k8s/client.h"

#include <gtest/gtest.h>

#include <thread>

#include "k8s/api_error.h"
#include "tests/unit/k8s/fake_api_server.h"

namespace mf::k8s {
namespace {

using testing::FakeApiServer;

constexpr char kPods[] = "/api/v1/pods";
constexpr char kDeployments[] = "/apis/apps/v1/deployments";

Json Pod(const std::string& name, const std::string& ns = "ml") {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec", {{"containers", Json::array({{{"name", "c"}, {"image", "busybox"}}})}}}};
}

ClientOptions FastOptions() {
  ClientOptions o;
  o.qps = 0;  // unlimited unless a test says otherwise
  o.backoff_base = std::chrono::milliseconds(1);
  o.backoff_cap = std::chrono::milliseconds(20);
  return o;
}

class ClientTest : public ::testing::Test {
 protected:
  std::shared_ptr<FakeApiServer> server_ = std::make_shared<FakeApiServer>();
  Client client_{server_, ClusterConfig{}, FastOptions()};
};

TEST_F(ClientTest, CreateGetUpdateDelete) {
  auto created = client_.Create({resources::Pods(), "ml", "", ""}, Pod("web-0"));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_FALSE(ResourceVersion(*created).empty());

  auto got = client_.Get({resources::Pods(), "ml", "web-0", ""});
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)["metadata"]["uid"], (*created)["metadata"]["uid"]);

  Json changed = *got;
  changed["metadata"]["labels"]["app"] = "web";
  auto updated = client_.Update({resources::Pods(), "ml", "web-0", ""}, changed);
  ASSERT_TRUE(updated.ok()) << updated.status().ToString();
  EXPECT_EQ((*updated)["metadata"]["labels"]["app"], "web");
  EXPECT_NE(ResourceVersion(*updated), ResourceVersion(*got));

  ASSERT_TRUE(client_.Delete({resources::Pods(), "ml", "web-0", ""}).ok());
  EXPECT_TRUE(IsNotFound(client_.Get({resources::Pods(), "ml", "web-0", ""}).status()));
  EXPECT_TRUE(IsNotFound(client_.Delete({resources::Pods(), "ml", "web-0", ""})));
}

TEST_F(ClientTest, ErrorsCarryKubernetesReasonAndMessage) {
  ASSERT_TRUE(client_.Create({resources::Pods(), "ml", "", ""}, Pod("a")).ok());
  auto again = client_.Create({resources::Pods(), "ml", "", ""}, Pod("a"));
  EXPECT_TRUE(IsAlreadyExists(again.status()));
  EXPECT_NE(again.status().message().find("AlreadyExists: pods \"a\" already exists (HTTP 409)"), std::string::npos)
      << again.status().message();
  auto missing = client_.Get({resources::Pods(), "ml", "nope", ""});
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("GET /api/v1/namespaces/ml/pods/nope"), std::string::npos);
}

TEST_F(ClientTest, StaleUpdateIsAConflict) {
  auto created = client_.Create({resources::Pods(), "ml", "", ""}, Pod("a"));
  ASSERT_TRUE(created.ok());
  Json first = *created, second = *created;
  first["metadata"]["labels"]["by"] = "first";
  second["metadata"]["labels"]["by"] = "second";
  ASSERT_TRUE(client_.Update({resources::Pods(), "ml", "a", ""}, first).ok());
  auto stale = client_.Update({resources::Pods(), "ml", "a", ""}, second);
  EXPECT_TRUE(IsConflict(stale.status())) << stale.status().ToString();
  EXPECT_EQ(server_->Object(kPods, "ml", "a")->at("metadata").at("labels").at("by"), "first");
}

TEST_F(ClientTest, RetryOnConflictRereadsUntilTheWriteLands) {
  ASSERT_TRUE(client_.Create({resources::Pods(), "ml", "", ""}, Pod("counter")).ok());
  int attempts = 0;
  const ResourceRef ref{resources::Pods(), "ml", "counter", ""};
  Status s = RetryOnConflict([&]() -> Status {
    ++attempts;
    MF_ASSIGN_OR_RETURN(Json pod, client_.Get(ref));
    if (attempts <= 2) {
      // Another writer gets in between our read and our write.
      Json racer = pod;
      racer["metadata"]["annotations"]["racer"] = std::to_string(attempts);
      EXPECT_TRUE(client_.Update(ref, racer).ok());
    }
    pod["metadata"]["labels"]["mine"] = "yes";
    return client_.Update(ref, pod).status();
  });
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(attempts, 3);
  const Json stored = *server_->Object(kPods, "ml", "counter");
  EXPECT_EQ(stored["metadata"]["labels"]["mine"], "yes");
  EXPECT_EQ(stored["metadata"]["annotations"]["racer"], "2");  // the racer's write was not lost
}

TEST_F(ClientTest, ReplaceStatusRemovesWhatTheNewStatusLacksAndSkipsNoChange) {
  Json pod = Pod("s");
  pod["status"] = {{"phase", "Running"}, {"message", "old"}};
  ASSERT_TRUE(client_.Create({resources::Pods(), "ml", "", ""}, pod).ok());
  const Json stored = *server_->Object(kPods, "ml", "s");
  const size_t before = server_->requests().size();
  auto same = client_.ReplaceStatus(resources::Pods(), stored, stored["status"]);
  ASSERT_TRUE(same.ok()) << same.status().ToString();
  EXPECT_FALSE(same->has_value());
  EXPECT_EQ(server_->requests().size(), before);  // no request for an unchanged status

  auto replaced = client_.ReplaceStatus(resources::Pods(), stored, {{"phase", "Succeeded"}});
  ASSERT_TRUE(replaced.ok()) << replaced.status().ToString();
  ASSERT_TRUE(replaced->has_value());
  const HttpRequest last = server_->requests().back();
  EXPECT_EQ(last.method, "PATCH");
  EXPECT_EQ(last.target, "/api/v1/namespaces/ml/pods/s/status");
  EXPECT_EQ(last.headers.at("Content-Type"), "application/merge-patch+json");
  EXPECT_EQ(Json::parse(last.body), (Json{{"status", {{"phase", "Succeeded"}, {"message", nullptr}}}}));
}

TEST_F(ClientTest, RetryOnConflictGivesUpAfterAttempts) {
  int attempts = 0;
  Status s = RetryOnConflict(
      [&] {
        ++attempts;
        return Aborted("Conflict");
      },
      3, std::chrono::milliseconds(1));
  EXPECT_TRUE(IsConflict(s));
  EXPECT_EQ(attempts, 3);
  attempts = 0;
  s = RetryOnConflict([&] {
    ++attempts;
    return NotFound("gone");
  });
  EXPECT_EQ(attempts, 1);  // only conflicts are retried
}

TEST_F(ClientTest, MergePatchJsonPatchAndApply) {
  ASSERT_TRUE(client_.Create({resources::Pods(), "ml", "", ""}, Pod("p")).ok());
  const ResourceRef ref{resources::Pods(), "ml", "p", ""};
  auto merged = client_.Patch(ref, PatchType::kMerge, {{"metadata", {{"labels", {{"a", "1"}}}}}});
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_EQ((*merged)["metadata"]["labels"]["a"], "1");

  auto patched = client_.Patch(ref, PatchType::kJson,
                               Json::array({{{"op", "add"}, {"path", "/metadata/labels/b"}, {"value", "2"}}}));
  ASSERT_TRUE(patched.ok()) << patched.status().ToString();
  EXPECT_EQ((*patched)["metadata"]["labels"], (Json{{"a", "1"}, {"b", "2"}}));

  auto bad = client_.Patch(ref, PatchType::kJson, Json::array({{{"op", "remove"}, {"path", "/nope"}}}));
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(client_.Patch(ref, PatchType::kJson, Json::object()).status().code(), StatusCode::kInvalidArgument);

  Json desired = {
      {"apiVersion", "apps/v1"}, {"kind", "Deployment"}, {"metadata", {{"name", "web"}}}, {"spec", {{"replicas", 3}}}};
  auto applied = client_.Apply({resources::Deployments(), "ml", "web", ""}, desired, "modelfleet-operator");
  ASSERT_TRUE(applied.ok()) << applied.status().ToString();
  EXPECT_EQ((*applied)["spec"]["replicas"], 3);
  const HttpRequest last = server_->requests().back();
  EXPECT_EQ(last.method, "PATCH");
  EXPECT_EQ(last.target, "/apis/apps/v1/namespaces/ml/deployments/web?fieldManager=modelfleet-operator&force=true");
  EXPECT_EQ(last.headers.at("Content-Type"), "application/apply-patch+yaml");
  EXPECT_EQ(client_.Apply({resources::Deployments(), "ml", "web", ""}, desired, "").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(client_.Apply({resources::Deployments(), "ml", "web", ""}, Json{{"spec", 1}}, "m").status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(ClientTest, StatusAndScaleSubresources) {
  server_->Put(kDeployments, {{"apiVersion", "apps/v1"},
                              {"kind", "Deployment"},
                              {"metadata", {{"name", "web"}, {"namespace", "ml"}}},
                              {"spec", {{"replicas", 2}}}});
  const ResourceRef scale_ref{resources::Deployments(), "ml", "web", "scale"};
  auto scale = client_.Get(scale_ref);
  ASSERT_TRUE(scale.ok()) << scale.status().ToString();
  EXPECT_EQ((*scale)["spec"]["replicas"], 2);
  (*scale)["spec"]["replicas"] = 5;
  ASSERT_TRUE(client_.Update(scale_ref, *scale).ok());
  EXPECT_EQ(server_->Object(kDeployments, "ml", "web")->at("spec").at("replicas"), 5);

  auto deployment = client_.Get({resources::Deployments(), "ml", "web", ""});
  ASSERT_TRUE(deployment.ok());
  (*deployment)["status"] = {{"readyReplicas", 5}};
  (*deployment)["spec"]["replicas"] = 99;  // ignored by the status subresource
  ASSERT_TRUE(client_.Update({resources::Deployments(), "ml", "web", "status"}, *deployment).ok());
  const Json stored = *server_->Object(kDeployments, "ml", "web");
  EXPECT_EQ(stored["status"]["readyReplicas"], 5);
  EXPECT_EQ(stored["spec"]["replicas"], 5);
}

TEST_F(ClientTest, ListFollowsQueryOptions) {
  for (const char* name : {"a", "b"}) ASSERT_TRUE(client_.Create({resources::Pods(), "ml", "", ""}, Pod(name)).ok());
  ASSERT_TRUE(client_.Create({resources::Pods(), "other", "", ""}, Pod("c", "other")).ok());
  ListOptions options;
  options.label_selector = "app in (web)";
  auto list = client_.List({resources::Pods(), "ml", "", ""}, options);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ((*list)["items"].size(), 2u);
  EXPECT_FALSE(ResourceVersion(*list).empty());
  EXPECT_EQ(server_->requests().back().target, "/api/v1/namespaces/ml/pods?labelSelector=app%20in%20%28web%29");
  auto all = client_.List({resources::Pods(), "", "", ""});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ((*all)["items"].size(), 3u);
}

TEST_F(ClientTest, PodLogs) {
  server_->SetPodLog("ml", "web-0", "line 1\nline 2\n");
  LogOptions options;
  options.container = "server";
  options.tail_lines = 2;
  auto logs = client_.Logs("ml", "web-0", options);
  ASSERT_TRUE(logs.ok()) << logs.status().ToString();
  EXPECT_EQ(*logs, "line 1\nline 2\n");
  EXPECT_EQ(server_->requests().back().target, "/api/v1/namespaces/ml/pods/web-0/log?container=server&tailLines=2");
}

TEST_F(ClientTest, RetriesThrottlingHonouringRetryAfter) {
  ClientOptions options = FastOptions();
  options.backoff_cap = std::chrono::seconds(5);
  Client client(server_, ClusterConfig{}, options);
  server_->Put(kPods, Pod("a"));
  server_->FailNext(1, 429, /*retry_after_seconds=*/1);
  const auto start = std::chrono::steady_clock::now();
  auto got = client.Get({resources::Pods(), "ml", "a", ""});
  const auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_GE(elapsed, std::chrono::milliseconds(950));
  EXPECT_EQ(server_->requests().size(), 2u);
}

TEST_F(ClientTest, RetriesServerErrorsButNotNonIdempotentCreate) {
  server_->Put(kPods, Pod("a"));
  server_->FailNext(3, 503);
  EXPECT_TRUE(client_.Get({resources::Pods(), "ml", "a", ""}).ok());
  EXPECT_EQ(server_->requests().size(), 4u);

  server_->FailNext(1, 500, std::nullopt, "POST");
  auto created = client_.Create({resources::Pods(), "ml", "", ""}, Pod("b"));
  EXPECT_EQ(created.status().code(), StatusCode::kInternal);
  EXPECT_EQ(server_->requests().size(), 5u);  // one POST, no retry

  server_->FailNext(10, 503);
  auto exhausted = client_.Get({resources::Pods(), "ml", "a", ""});
  EXPECT_EQ(exhausted.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(server_->requests().size(), 5u + 1 + FastOptions().max_retries);
}

TEST_F(ClientTest, ClientSideRateLimit) {
  ClientOptions options = FastOptions();
  options.qps = 20;
  options.burst = 2;
  Client client(server_, ClusterConfig{}, options);
  server_->Put(kPods, Pod("a"));
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(client.Get({resources::Pods(), "ml", "a", ""}).ok());
  // Burst of 2, then 4 more at 20/s: at least 200 ms.
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(180));
}

TEST_F(ClientTest, SendsBearerTokenFromTokenSource) {
  ClusterConfig config;
  config.token = std::make_shared<StaticTokenSource>("s3cret");
  Client client(server_, config, FastOptions());
  (void)client.Get({resources::Pods(), "ml", "a", ""});
  EXPECT_EQ(server_->requests().back().headers.at("Authorization"), "Bearer s3cret");
}

TEST_F(ClientTest, BadArgumentsChangeNothing) {
  EXPECT_EQ(client_.Get({resources::Pods(), "ml", "", ""}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(client_.Create({resources::Pods(), "ml", "x", ""}, Pod("y")).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(client_.Update({resources::Pods(), "ml", "x", ""}, Json::array()).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(client_.Delete({resources::Pods(), "ml", "", ""}).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(server_->requests().empty());
}

TEST_F(ClientTest, WatchReassemblesSplitLinesAndStopsOnHandler) {
  server_->set_split_chunks(true);
  const int64_t from = server_->resource_version();
  server_->Put(kPods, Pod("a"));
  server_->Put(kPods, Pod("b"));
  std::vector<std::string> names;
  WatchOptions options;
  options.resource_version = std::to_string(from);
  Status s = client_.Watch({resources::Pods(), "ml", "", ""}, options, [&](WatchEvent&& e) {
    EXPECT_EQ(e.type, WatchEventType::kAdded);
    names.push_back(e.object["metadata"]["name"]);
    return names.size() < 2;
  });
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(names, (std::vector<std::string>{"a", "b"}));
  EXPECT_NE(server_->requests().back().target.find("watch=true&resourceVersion=" + std::to_string(from) +
                                                   "&allowWatchBookmarks=true&timeoutSeconds=300"),
            std::string::npos);
}

TEST_F(ClientTest, WatchFromCompactedVersionIsGone) {
  server_->Put(kPods, Pod("a"));
  server_->Compact();
  WatchOptions options;
  options.resource_version = "1";
  Status s = client_.Watch({resources::Pods(), "ml", "", ""}, options, [](WatchEvent&&) { return true; });
  EXPECT_TRUE(IsGone(s)) << s.ToString();
  EXPECT_NE(s.message().find("too old resource version"), std::string::npos);
}

// Streams fixed bytes as a watch body, for the decoder's handling of what a broken or hostile
// server might send.
class ScriptedWatchTransport : public Transport {
 public:
  explicit ScriptedWatchTransport(std::vector<std::string> chunks) : chunks_(std::move(chunks)) {}
  StatusOr<HttpResponse> Send(const HttpRequest&) override { return Unimplemented("unary"); }
  StatusOr<HttpResponse> Stream(const HttpRequest&, const ChunkHandler& on_chunk, std::stop_token) override {
    for (const std::string& c : chunks_) {
      if (!on_chunk(c)) break;
    }
    HttpResponse r;
    r.status = 200;
    return r;
  }

 private:
  std::vector<std::string> chunks_;
};

TEST(WatchDecoderTest, MalformedStreamsEndWithAClearError) {
  struct Case {
    std::vector<std::string> chunks;
    StatusCode code;
    size_t events;
  };
  const std::string added = R"({"type":"ADDED","object":{"metadata":{"name":"a"}}})";
  const Case cases[] = {
      {{added + "\n", "not json\n", added + "\n"}, StatusCode::kDataLoss, 1},
      {{R"({"type":"ADDED"})"
        "\n"},
       StatusCode::kDataLoss,
       0},
      {{R"({"type":7,"object":{}})"
        "\n"},
       StatusCode::kDataLoss,
       0},
      {{R"({"type":"SURPRISE","object":{}})"
        "\n"},
       StatusCode::kDataLoss,
       0},
      {{"[1,2]\n"}, StatusCode::kDataLoss, 0},
      {{R"({"type":"ERROR","object":{"code":"x","reason":5}})"
        "\n"},
       StatusCode::kInternal,
       0},
      {{R"({"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"too old"}})"
        "\n"},
       StatusCode::kOutOfRange,
       0},
      // Split across chunks, blank keep-alive lines, CRLF, and a trailing partial line.
      {{added.substr(0, 5), added.substr(5) + "\r\n\n", "   \n", added + "\n", "{\"type\":\"ADD"}, StatusCode::kOk, 2},
  };
  for (const Case& c : cases) {
    Client client(std::make_shared<ScriptedWatchTransport>(c.chunks), ClusterConfig{}, ClientOptions{.qps = 0});
    size_t events = 0;
    Status s = client.Watch({resources::Pods(), "ml", "", ""}, {}, [&](WatchEvent&&) {
      ++events;
      return true;
    });
    EXPECT_EQ(s.code(), c.code) << s.ToString() << " for " << c.chunks[0];
    EXPECT_EQ(events, c.events) << c.chunks[0];
  }
}

TEST_F(ClientTest, TransportFailureIsRetriedThenReported) {
  server_->set_unavailable(true);
  auto got = client_.Get({resources::Pods(), "ml", "a", ""});
  EXPECT_EQ(got.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(got.status().message().find("connection refused"), std::string::npos);
  EXPECT_EQ(server_->requests().size(), 1u + FastOptions().max_retries);
}

}  // namespace
}  // namespace mf::k8s
