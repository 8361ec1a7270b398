#include "tools/local/apiserver/apply.h"

#include <gtest/gtest.h>

namespace mf::local {
namespace {

using json = nlohmann::json;

json Applied(int replicas, bool with_color) {
  json o = {{"apiVersion", "x.io/v1"}, {"kind", "W"}, {"metadata", {{"name", "w"}}},
            {"spec", {{"replicas", replicas}, {"size", "small"}}}};
  if (with_color) o["spec"]["color"] = "red";
  return o;
}

TEST(ServerSideApplyTest, CreatesRecordsOwnershipAndRemovesDroppedFields) {
  ApplyRequest me{"me", false, "x.io/v1", "2026-01-01T00:00:00Z"};
  auto first = ServerSideApply(nullptr, Applied(2, true), me);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ((*first)["metadata"]["managedFields"].size(), 1u);
  const json& entry = (*first)["metadata"]["managedFields"][0];
  EXPECT_EQ(entry["manager"], "me");
  EXPECT_EQ(entry["operation"], "Apply");
  EXPECT_TRUE(entry["fieldsV1"]["f:spec"].contains("f:color"));

  auto second = ServerSideApply(*first, Applied(3, false), me);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ((*second)["spec"]["replicas"], 3);
  EXPECT_FALSE((*second)["spec"].contains("color")) << "a field this manager stopped applying is removed";
}

TEST(ServerSideApplyTest, ConflictsWithAnotherOwnerUnlessForced) {
  ApplyRequest me{"me", false, "x.io/v1", "t"};
  json object = *ServerSideApply(nullptr, Applied(2, false), me);
  json scaled = object;
  scaled["spec"]["replicas"] = 5;
  RecordUpdate(scaled, object, "kubectl-scale", "x.io/v1", "t");

  auto conflict = ServerSideApply(scaled, Applied(2, false), me);
  EXPECT_EQ(conflict.status().code(), StatusCode::kAborted);
  EXPECT_NE(conflict.status().message().find("conflict with \"kubectl-scale\""), std::string::npos);
  EXPECT_NE(conflict.status().message().find(".spec.replicas"), std::string::npos);

  auto same_value = ServerSideApply(scaled, Applied(5, false), me);
  EXPECT_TRUE(same_value.ok()) << "agreeing on a value is shared ownership, not a conflict";

  me.force = true;
  auto forced = ServerSideApply(scaled, Applied(2, false), me);
  ASSERT_TRUE(forced.ok());
  EXPECT_EQ((*forced)["spec"]["replicas"], 2);
  for (const auto& e : (*forced)["metadata"]["managedFields"]) {
    if (e["manager"] == "kubectl-scale") FAIL() << "forcing takes the field away: " << e.dump();
  }
}

TEST(ServerSideApplyTest, FieldOwnedByAnotherManagerSurvivesWhenDropped) {
  ApplyRequest a{"a", false, "x.io/v1", "t"};
  ApplyRequest b{"b", false, "x.io/v1", "t"};
  json object = *ServerSideApply(nullptr, Applied(2, true), a);
  object = *ServerSideApply(object, Applied(2, true), b);  // b co-owns every field
  object = *ServerSideApply(object, Applied(2, false), a);
  EXPECT_EQ(object["spec"]["color"], "red");
}

TEST(ServerSideApplyTest, KeyedListsMergeByKey) {
  ApplyRequest a{"a", false, "v1", "t"};
  ApplyRequest b{"b", false, "v1", "t"};
  json pod_a = {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", {{"name", "p"}}},
                {"spec", {{"containers", {{{"name", "one"}, {"image", "i:1"}}}}}}};
  json pod_b = pod_a;
  pod_b["spec"]["containers"] = {{{"name", "two"}, {"image", "i:2"}}};
  json object = *ServerSideApply(nullptr, pod_a, a);
  object = *ServerSideApply(object, pod_b, b);
  ASSERT_EQ(object["spec"]["containers"].size(), 2u);
  EXPECT_TRUE(object["metadata"]["managedFields"][1]["fieldsV1"]["f:spec"]["f:containers"].contains("k:{\"name\":\"two\"}"));
}

TEST(RecordUpdateTest, TakesOwnershipOfChangedFieldsOnly) {
  json before = {{"metadata", {{"name", "x"}}}, {"data", {{"a", "1"}, {"b", "2"}}}};
  json after = before;
  after["data"]["b"] = "3";
  RecordUpdate(after, before, "editor", "v1", "t");
  const json& fields = after["metadata"]["managedFields"][0]["fieldsV1"];
  EXPECT_TRUE(fields["f:data"].contains("f:b"));
  EXPECT_FALSE(fields["f:data"].contains("f:a"));
  json unchanged = after;
  RecordUpdate(unchanged, after, "other", "v1", "t");
  EXPECT_EQ(unchanged, after) << "a no-op write records nothing";
}

}  // namespace
}  // namespace mf::local
