#include "tools/local/apiserver/patch.h"

#include <gtest/gtest.h>

namespace mf::local {
namespace {

using json = nlohmann::json;

TEST(MergePatchTest, FollowsRfc7386) {
  json target = json::parse(R"({"a":"b","c":{"d":"e","f":"g"},"l":[1,2]})");
  auto out = ApplyMergePatch(target, json::parse(R"({"a":"z","c":{"f":null},"l":[3]})"));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, json::parse(R"({"a":"z","c":{"d":"e"},"l":[3]})"));
  EXPECT_FALSE(ApplyMergePatch(target, json::array()).ok());
}

TEST(JsonPatchTest, AppliesEveryOperation) {
  json target = json::parse(R"({"spec":{"list":[1,2,3],"x":"y"}})");
  auto out = ApplyJsonPatch(target, json::parse(R"([
      {"op":"add","path":"/spec/list/1","value":9},
      {"op":"remove","path":"/spec/list/0"},
      {"op":"replace","path":"/spec/x","value":"z"},
      {"op":"copy","from":"/spec/x","path":"/spec/copied"},
      {"op":"move","from":"/spec/copied","path":"/spec/moved"},
      {"op":"add","path":"/spec/list/-","value":4},
      {"op":"test","path":"/spec/moved","value":"z"}])"));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(*out, json::parse(R"({"spec":{"list":[9,2,3,4],"x":"z","moved":"z"}})"));
}

TEST(JsonPatchTest, RejectsBadOperationsWithoutChangingTheTarget) {
  json target = json::parse(R"({"a":[1]})");
  for (const char* bad : {R"({"op":"add"})", R"([{"op":"add","path":"/a/5","value":1}])",
                          R"([{"op":"remove","path":"/missing"}])", R"([{"op":"replace","path":"/b","value":1}])",
                          R"([{"op":"test","path":"/a/0","value":2}])", R"([{"op":"frobnicate","path":"/a"}])",
                          R"([{"op":"add","path":"a","value":1}])", R"([{"op":"remove","path":"/a/x"}])"}) {
    EXPECT_FALSE(ApplyJsonPatch(target, json::parse(bad)).ok()) << bad;
  }
  EXPECT_EQ(target, json::parse(R"({"a":[1]})"));
}

TEST(StrategicMergePatchTest, MergesListsByKeyAndHonoursDirectives) {
  json deployment = json::parse(R"({"spec":{"template":{"spec":{"containers":[
      {"name":"a","image":"a:1","env":[{"name":"X","value":"1"}]},
      {"name":"b","image":"b:1"}]}}},
      "metadata":{"finalizers":["f1"]}})");
  auto out = ApplyStrategicMergePatch(deployment, json::parse(R"({
      "metadata":{"finalizers":["f2"]},
      "spec":{"template":{"spec":{"containers":[
        {"name":"a","image":"a:2","env":[{"name":"Y","value":"2"}]},
        {"name":"b","$patch":"delete"},
        {"name":"c","image":"c:1"}],
        "$setElementOrder/containers":[{"name":"a"},{"name":"c"}]}}}})"));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const json& containers = (*out)["spec"]["template"]["spec"]["containers"];
  ASSERT_EQ(containers.size(), 2u);
  EXPECT_EQ(containers[0]["image"], "a:2");
  EXPECT_EQ(containers[0]["env"].size(), 2u) << "env merges by name";
  EXPECT_EQ(containers[1]["name"], "c");
  EXPECT_EQ((*out)["metadata"]["finalizers"], json({"f1", "f2"}));
  EXPECT_FALSE((*out)["spec"]["template"]["spec"].contains("$setElementOrder/containers"));
}

TEST(StrategicMergePatchTest, ReplaceAndDeleteFromPrimitiveList) {
  json target = json::parse(R"({"metadata":{"finalizers":["a","b"]},"spec":{"selector":{"x":"1","y":"2"}}})");
  auto out = ApplyStrategicMergePatch(target, json::parse(
      R"({"metadata":{"$deleteFromPrimitiveList/finalizers":["a"]},"spec":{"selector":{"$patch":"replace","z":"3"}}})"));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)["metadata"]["finalizers"], json({"b"}));
  EXPECT_EQ((*out)["spec"]["selector"], json::parse(R"({"z":"3"})"));
  EXPECT_FALSE(ApplyStrategicMergePatch(target, json::parse(R"({"spec":{"$patch":"explode"}})")).ok());
  EXPECT_FALSE(ApplyStrategicMergePatch(target, json::parse(R"({"spec":{"containers":[{"image":"x"}]}})")).ok());
}

}  // namespace
}  // namespace mf::local
