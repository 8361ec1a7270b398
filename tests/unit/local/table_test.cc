#include "tools/local/apiserver/table.h"

#include <gtest/gtest.h>

#include "tools/local/apiserver/discovery.h"

namespace mf::local {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

json Crd() {
  return json::parse(R"({"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
    "metadata":{"name":"widgets.example.io"},
    "spec":{"group":"example.io","scope":"Namespaced","names":{"plural":"widgets","kind":"Widget","shortNames":["wd"]},
      "versions":[{"name":"v1","served":true,"storage":true,"subresources":{"status":{},"scale":{"specReplicasPath":".spec.replicas","statusReplicasPath":".status.replicas"}},
        "additionalPrinterColumns":[{"name":"Replicas","type":"integer","jsonPath":".spec.replicas"},
                                    {"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}],
        "schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object","properties":{"replicas":{"type":"integer","default":1}}}}}}}]}})");
}

TEST(CrdResourcesTest, ServedVersionsBecomeResourcesWithAdmission) {
  auto resources = ResourcesFromCrd(Crd());
  ASSERT_TRUE(resources.ok()) << resources.status().ToString();
  ASSERT_EQ(resources->size(), 1u);
  const ResourceInfo& r = (*resources)[0];
  EXPECT_EQ(r.gvr().ToString(), "widgets.v1.example.io");
  EXPECT_TRUE(r.type.has_status_subresource);
  ASSERT_TRUE(r.scale.has_value());
  json object = {{"metadata", {{"name", "w"}}}, {"spec", {{"unknown", 1}}}};
  ASSERT_TRUE(r.type.admit(object, nullptr).ok());
  EXPECT_EQ(object["spec"], json({{"replicas", 1}}));

  json bad = Crd();
  bad["spec"]["versions"][0]["storage"] = false;
  EXPECT_EQ(ResourcesFromCrd(bad).status().code(), StatusCode::kInvalidArgument);
  bad = Crd();
  bad["metadata"]["name"] = "wrong";
  EXPECT_EQ(ResourcesFromCrd(bad).status().code(), StatusCode::kInvalidArgument);
}

TEST(TableTest, UsesPrinterColumnsAndHumanAges) {
  ResourceInfo r = (*ResourcesFromCrd(Crd()))[0];
  json w = {{"metadata", {{"name", "w"}, {"creationTimestamp", "2026-01-01T00:00:00Z"}}}, {"spec", {{"replicas", 3}}}};
  auto now = std::chrono::system_clock::from_time_t(1767225600) + 3h + 5min;  // 2026-01-01T03:05:00Z
  json table = ToTable(r, {w}, "7", "", now);
  EXPECT_EQ(table["kind"], "Table");
  EXPECT_EQ(table["columnDefinitions"][0]["name"], "Name");
  EXPECT_EQ(table["columnDefinitions"][1]["name"], "Replicas");
  EXPECT_EQ(table["rows"][0]["cells"], json({"w", 3, "3h5m"}));
  EXPECT_EQ(table["rows"][0]["object"]["kind"], "PartialObjectMetadata");
  EXPECT_EQ(HumanDuration(45s), "45s");
  EXPECT_EQ(HumanDuration(3 * 24h + 2h), "3d2h");
}

TEST(DiscoveryTest, ListsResourcesSubresourcesAndOpenApiPatchParameters) {
  ResourceCatalog catalog;
  catalog.SetCrdResources("widgets.example.io", *ResourcesFromCrd(Crd()));
  auto snap = catalog.snapshot();
  auto list = ApiResourceList(*snap, "example.io", "v1");
  ASSERT_TRUE(list.has_value());
  std::vector<std::string> names;
  for (const auto& r : (*list)["resources"]) names.push_back(r["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{"widgets", "widgets/status", "widgets/scale"}));
  EXPECT_FALSE(ApiResourceList(*snap, "example.io", "v9").has_value());

  auto doc = OpenApiV3Document(*snap, "apis/example.io/v1");
  ASSERT_TRUE(doc.has_value());
  const json& patch = (*doc)["paths"]["/apis/example.io/v1/namespaces/{namespace}/widgets/{name}"]["patch"];
  EXPECT_EQ(patch["x-kubernetes-group-version-kind"]["kind"], "Widget");
  bool field_validation = false;
  for (const auto& p : patch["parameters"]) field_validation |= p["name"] == "fieldValidation";
  EXPECT_TRUE(field_validation);
  EXPECT_TRUE((*doc)["components"]["schemas"].contains("io.example.v1.Widget"));
  EXPECT_TRUE(OpenApiV3Root(*snap)["paths"].contains("apis/example.io/v1"));
}

TEST(DiscoveryTest, AggregatedDiscoverySplitsCoreFromNamedGroups) {
  ResourceCatalog catalog;
  catalog.SetCrdResources("widgets.example.io", *ResourcesFromCrd(Crd()));
  auto snap = catalog.snapshot();
  json core = AggregatedDiscovery(*snap, true);
  ASSERT_EQ(core["items"].size(), 1u);
  EXPECT_EQ(core["items"][0]["metadata"]["name"], "");
  json apis = AggregatedDiscovery(*snap, false);
  EXPECT_EQ(apis["kind"], "APIGroupDiscoveryList");
  const json* widgets = nullptr;
  for (const auto& g : apis["items"]) {
    EXPECT_NE(g["metadata"]["name"], "");
    if (g["metadata"]["name"] == "example.io") widgets = &g["versions"][0]["resources"][0];
  }
  ASSERT_NE(widgets, nullptr);
  EXPECT_EQ((*widgets)["resource"], "widgets");
  EXPECT_EQ((*widgets)["scope"], "Namespaced");
  EXPECT_EQ((*widgets)["shortNames"], json({"wd"}));
  EXPECT_EQ((*widgets)["subresources"][1]["responseKind"]["kind"], "Scale");
  // Removing the CRD's resources removes the group.
  catalog.SetCrdResources("widgets.example.io", {});
  for (const auto& g : AggregatedDiscovery(*catalog.snapshot(), false)["items"]) EXPECT_NE(g["metadata"]["name"], "example.io");
}

}  // namespace
}  // namespace mf::local
