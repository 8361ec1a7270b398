#include "tools/local/openapi/builtin_schemas.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace mf::local {
namespace {

using json = nlohmann::json;

TEST(BuiltinSchemas, NamesServedKindsLikeKubeApiserver) {
  EXPECT_EQ(BuiltinSchemaName("apps", "v1", "Deployment"), "io.k8s.api.apps.v1.Deployment");
  EXPECT_EQ(BuiltinSchemaName("", "v1", "Pod"), "io.k8s.api.core.v1.Pod");
  EXPECT_EQ(BuiltinSchemaName("", "v1", "Event"), "io.k8s.api.core.v1.Event");
  EXPECT_EQ(BuiltinSchemaName("discovery.k8s.io", "v1", "EndpointSlice"), "io.k8s.api.discovery.v1.EndpointSlice");
  EXPECT_EQ(BuiltinSchemaName("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition");
  EXPECT_EQ(BuiltinSchemaName("apps", "v1", "DeploymentList"), "io.k8s.api.apps.v1.DeploymentList");
  EXPECT_FALSE(BuiltinSchemaName("apps", "v1", "StatefulSet"));
}

TEST(BuiltinSchemas, ItemizesFieldsWithReferencesAndDescriptions) {
  const json& schemas = BuiltinSchemas();
  const json& spec = schemas.at("io.k8s.api.apps.v1.DeploymentSpec");
  EXPECT_EQ(spec["properties"]["template"]["$ref"], "#/components/schemas/io.k8s.api.core.v1.PodTemplateSpec");
  EXPECT_NE(spec["properties"]["replicas"]["description"].get<std::string>().find("Number of desired pods"),
            std::string::npos);
  EXPECT_EQ(spec["required"], json({"selector", "template"}));
  const json& container = schemas.at("io.k8s.api.core.v1.Container");
  EXPECT_EQ(container["required"], json({"name"}));
  // A field newer than the client's Kubernetes 1.22 comes from the generator's supplement.
  EXPECT_TRUE(schemas.at("io.k8s.api.core.v1.Probe")["properties"].contains("grpc"));
  EXPECT_TRUE(
      schemas.at("io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps")["properties"].contains(
          "x-kubernetes-validations"));
}

TEST(BuiltinSchemas, ClosureFollowsReferences) {
  std::set<std::string> names = {"io.k8s.api.apps.v1.Deployment"};
  AddReferencedSchemas(BuiltinSchemas(), names);
  EXPECT_TRUE(names.count("io.k8s.api.core.v1.Container"));
  EXPECT_TRUE(names.count("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"));
  EXPECT_TRUE(names.count("io.k8s.apimachinery.pkg.util.intstr.IntOrString"));
  EXPECT_FALSE(names.count("io.k8s.api.rbac.v1.Role"));
}

TEST(BuiltinSchemas, PrunesUnknownFieldsWithStrictDecodingPaths) {
  json deployment = json::parse(R"({
    "apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "d", "labels": {"app": "x"}, "bogus": 1},
    "spec": {"replicas": 2, "replica": 3, "selector": {"matchLabels": {"app": "x"}},
             "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxSurgee": 1}},
             "template": {"metadata": {"labels": {"app": "x"}},
                          "spec": {"containers": [{"name": "c", "image": "i", "resources": {"limits": {"cpu": 1}}},
                                                  {"name": "d", "image": "i", "imagee": "typo"}]}}}
  })");
  std::vector<std::string> unknown = PruneUnknownBuiltinFields(deployment, "io.k8s.api.apps.v1.Deployment");
  std::sort(unknown.begin(), unknown.end());
  EXPECT_EQ(unknown,
            (std::vector<std::string>{"metadata.bogus", "spec.replica", "spec.strategy.rollingUpdate.maxSurgee",
                                      "spec.template.spec.containers[1].imagee"}));
  EXPECT_FALSE(deployment["spec"].contains("replica"));
  EXPECT_FALSE(deployment["spec"]["template"]["spec"]["containers"][1].contains("imagee"));
  EXPECT_EQ(deployment["spec"]["replicas"], 2);
  EXPECT_EQ(deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"], 1);
}

TEST(BuiltinSchemas, KeepsListedPaths) {
  json rs = {{"spec", {{"replicas", 1}}}, {"status", {{"replicas", 1}, {"selector", "app=x"}, {"extra", 2}}}};
  std::vector<std::string> unknown =
      PruneUnknownBuiltinFields(rs, "io.k8s.api.apps.v1.ReplicaSet", {"status.selector"});
  EXPECT_EQ(unknown, std::vector<std::string>{"status.extra"});
  EXPECT_EQ(rs["status"]["selector"], "app=x");
  EXPECT_FALSE(rs["status"].contains("extra"));
}

TEST(BuiltinSchemas, KeepsArbitraryJsonAndKnownObjectsIntact) {
  json crd = json::parse(R"({
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "a.b.io"},
    "spec": {"group": "b.io", "scope": "Namespaced", "names": {"plural": "a", "kind": "A"},
             "versions": [{"name": "v1", "served": true, "storage": true,
                           "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                               "spec": {"type": "object", "default": {"anything": {"goes": true}},
                                        "x-kubernetes-validations": [{"rule": "self.x > 0", "message": "m"}]}}}}}]}
  })");
  json before = crd;
  EXPECT_TRUE(PruneUnknownBuiltinFields(
                  crd, "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition")
                  .empty());
  EXPECT_EQ(crd, before);
}

TEST(BuiltinSchemas, Swagger2UnwrapsReferences) {
  json v3 = {{"properties",
              {{"spec", {{"allOf", {{{"$ref", "#/components/schemas/X"}}}}, {"description", "d"}}},
               {"items", {{"type", "array"}, {"items", {{"$ref", "#/components/schemas/Y"}}}}}}}};
  json v2 = ToSwagger2Schema(v3);
  EXPECT_EQ(v2["properties"]["spec"], json({{"$ref", "#/definitions/X"}, {"description", "d"}}));
  EXPECT_EQ(v2["properties"]["items"]["items"]["$ref"], "#/definitions/Y");
}

}  // namespace
}  // namespace mf::local
