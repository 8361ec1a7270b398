#include "k8s/event_recorder.h"

#include <gtest/gtest.h>

#include "tests/unit/k8s/fake_api_server.h"

namespace mf::k8s {
namespace {

using testing::FakeApiServer;

Json ModelDeployment() {
  return {{"apiVersion", "modelfleet.io/v1alpha1"},
          {"kind", "ModelDeployment"},
          {"metadata", {{"name", "mnist"}, {"namespace", "ml"}, {"uid", "u-1"}, {"resourceVersion", "7"}}}};
}

class EventRecorderTest : public ::testing::Test {
 protected:
  Json Events() {
    auto list = client_.List({resources::Events(), "ml", "", ""});
    EXPECT_TRUE(list.ok()) << list.status().ToString();
    return list.ok() ? (*list)["items"] : Json::array();
  }
  std::shared_ptr<FakeApiServer> server_ = std::make_shared<FakeApiServer>();
  Client client_{server_, ClusterConfig{}, ClientOptions{.qps = 0}};
};

TEST_F(EventRecorderTest, CreatesEventWithInvolvedObject) {
  EventRecorder recorder(client_, {.component = "modelfleet-operator", .instance = "op-0"});
  ASSERT_TRUE(recorder.Record(ModelDeployment(), EventType::kNormal, "ScaledUp", "v1 scaled to 3").ok());
  recorder.Flush();
  const Json events = Events();
  ASSERT_EQ(events.size(), 1u);
  const Json& e = events[0];
  EXPECT_EQ(e["involvedObject"], (Json{{"apiVersion", "modelfleet.io/v1alpha1"},
                                       {"kind", "ModelDeployment"},
                                       {"name", "mnist"},
                                       {"namespace", "ml"},
                                       {"uid", "u-1"},
                                       {"resourceVersion", "7"}}));
  EXPECT_EQ(e["reason"], "ScaledUp");
  EXPECT_EQ(e["message"], "v1 scaled to 3");
  EXPECT_EQ(e["type"], "Normal");
  EXPECT_EQ(e["count"], 1);
  EXPECT_EQ(e["source"]["component"], "modelfleet-operator");
  EXPECT_EQ(e["reportingInstance"], "op-0");
  EXPECT_EQ(e["metadata"]["name"].get<std::string>().rfind("mnist.", 0), 0u);
}

TEST_F(EventRecorderTest, AggregatesRepeatsIntoCount) {
  EventRecorder recorder(client_, {.component = "op"});
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(recorder.Record(ModelDeployment(), EventType::kWarning, "RolloutAborted", "p99 too high").ok());
  }
  ASSERT_TRUE(recorder.Record(ModelDeployment(), EventType::kWarning, "RolloutAborted", "error rate").ok());
  recorder.Flush();
  const Json events = Events();
  ASSERT_EQ(events.size(), 2u);
  std::map<std::string, int> counts;
  for (const Json& e : events) counts[e["message"]] = e["count"];
  EXPECT_EQ(counts["p99 too high"], 3);
  EXPECT_EQ(counts["error rate"], 1);
}

TEST_F(EventRecorderTest, ExpiredEventStartsANewOne) {
  EventRecorder recorder(client_, {.component = "op"});
  ASSERT_TRUE(recorder.Record(ModelDeployment(), EventType::kNormal, "Synced", "ok").ok());
  recorder.Flush();
  const std::string first = Events()[0]["metadata"]["name"];
  ASSERT_TRUE(client_.Delete({resources::Events(), "ml", first, ""}).ok());  // the API server's TTL
  ASSERT_TRUE(recorder.Record(ModelDeployment(), EventType::kNormal, "Synced", "ok").ok());
  recorder.Flush();
  const Json events = Events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["count"], 1);
  EXPECT_NE(events[0]["metadata"]["name"], first);
}

TEST_F(EventRecorderTest, RejectsMalformedCallsWithoutWriting) {
  EventRecorder recorder(client_, {.component = "op"});
  EXPECT_EQ(recorder.Record(Json::object(), EventType::kNormal, "R", "m").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(
      recorder.Record({{"kind", "Pod"}, {"metadata", {{"namespace", "ml"}}}}, EventType::kNormal, "R", "m").code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(recorder.Record(ModelDeployment(), EventType::kNormal, "", "m").code(), StatusCode::kInvalidArgument);
  recorder.Flush();
  EXPECT_TRUE(server_->requests().empty());
}

TEST_F(EventRecorderTest, ClusterScopedObjectsRecordInDefault) {
  EventRecorder recorder(client_, {.component = "op"});
  ASSERT_TRUE(recorder
                  .Record({{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "n1"}}}}, EventType::kWarning,
                          "NodeNotReady", "kubelet stopped posting")
                  .ok());
  recorder.Flush();
  auto list = client_.List({resources::Events(), "default", "", ""});
  ASSERT_TRUE(list.ok());
  ASSERT_EQ((*list)["items"].size(), 1u);
  EXPECT_EQ((*list)["items"][0]["involvedObject"]["kind"], "Node");
}

}  // namespace
}  // namespace mf::k8s
