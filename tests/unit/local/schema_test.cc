#include "tools/local/apiserver/schema.h"

#include <gtest/gtest.h>

namespace mf::local {
namespace {

using json = nlohmann::json;

const json kSchema = json::parse(R"({
  "type":"object",
  "properties":{
    "spec":{"type":"object","required":["size"],"properties":{
      "size":{"type":"string","enum":["small","large"]},
      "replicas":{"type":"integer","minimum":0,"default":1},
      "name":{"type":"string","pattern":"^[a-z]+$","maxLength":5},
      "tags":{"type":"array","maxItems":2,"items":{"type":"string"}},
      "extra":{"type":"object","x-kubernetes-preserve-unknown-fields":true},
      "labels":{"type":"object","additionalProperties":{"type":"string"}},
      "port":{"x-kubernetes-int-or-string":true},
      "nested":{"type":"object","default":{},"properties":{"deep":{"type":"string","default":"d"}}}}},
    "status":{"type":"object","properties":{"ready":{"type":"boolean"}}}}})");

TEST(SchemaTest, PrunesUnknownFieldsButKeepsMetadataAndPreservedSubtrees) {
  json o = json::parse(R"({"apiVersion":"x/v1","kind":"W","metadata":{"name":"n","anything":1},
      "spec":{"size":"small","bogus":1,"extra":{"free":true},"labels":{"a":"b"}},"top":1})");
  auto removed = PruneUnknownFields(o, kSchema);
  EXPECT_EQ(removed, (std::vector<std::string>{"spec.bogus", "top"}));
  EXPECT_TRUE(o["metadata"].contains("anything"));
  EXPECT_TRUE(o["spec"]["extra"]["free"]);
  EXPECT_EQ(o["spec"]["labels"]["a"], "b");
}

TEST(SchemaTest, AppliesNestedDefaults) {
  json o = json::parse(R"({"spec":{"size":"small"}})");
  ApplyDefaults(o, kSchema);
  EXPECT_EQ(o["spec"]["replicas"], 1);
  EXPECT_EQ(o["spec"]["nested"]["deep"], "d") << "a defaulted object gets its own defaults";
}

TEST(SchemaTest, ReportsEveryViolationWithItsPath) {
  json o = json::parse(R"({"spec":{"size":"huge","replicas":-1,"name":"ABCDEFG","tags":["a","b","c"],
      "labels":{"a":1},"port":1.5}})");
  auto errors = ValidateAgainstSchema(o, kSchema);
  auto has = [&](const std::string& needle) {
    return std::any_of(errors.begin(), errors.end(), [&](const std::string& e) { return e.find(needle) != std::string::npos; });
  };
  EXPECT_TRUE(has("spec.size: Unsupported value: \"huge\""));
  EXPECT_TRUE(has("spec.replicas: Invalid value: -1"));
  EXPECT_TRUE(has("spec.name: Too long"));
  EXPECT_TRUE(has("should match"));
  EXPECT_TRUE(has("spec.tags: Too many"));
  EXPECT_TRUE(has("spec.labels.a: Invalid value: \"integer\""));
  EXPECT_TRUE(has("spec.port"));
  EXPECT_TRUE(ValidateAgainstSchema(json::parse(R"({"spec":{"size":"small","port":"http"}})"), kSchema).empty());
  auto missing = ValidateAgainstSchema(json::parse(R"({"spec":{}})"), kSchema);
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_NE(missing[0].find("spec.size is required"), std::string::npos);
}

TEST(JsonPathTest, EvaluatesFieldsIndexesAndFilters) {
  json o = json::parse(R"({"status":{"conditions":[{"type":"A","status":"False"},{"type":"Ready","status":"True"}]},
      "spec":{"list":[{"x":1}]}})");
  EXPECT_EQ(EvaluateJsonPath(o, ".status.conditions[?(@.type==\"Ready\")].status"), "True");
  EXPECT_EQ(EvaluateJsonPath(o, "{.spec.list[0].x}"), 1);
  EXPECT_TRUE(EvaluateJsonPath(o, ".spec.list[3].x").is_null());
  EXPECT_TRUE(EvaluateJsonPath(o, ".status.conditions[?(@.type==\"Gone\")].status").is_null());
  json target;
  EXPECT_TRUE(SetAtJsonPath(target, ".spec.replicas", 3));
  EXPECT_EQ(target["spec"]["replicas"], 3);
  EXPECT_FALSE(SetAtJsonPath(target, ".spec.list[0]", 1));
}

}  // namespace
}  // namespace mf::local
