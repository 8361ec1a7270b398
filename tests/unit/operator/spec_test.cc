#include "modeldeployment/spec.h"

#include <gtest/gtest.h>

#include "test_objects.h"

namespace mf::op {
namespace {

using testing::SampleModelDeployment;

TEST(SpecTest, ParsesTheSample) {
  auto md = ParseModelDeployment(SampleModelDeployment());
  ASSERT_TRUE(md.ok()) << md.status().message();
  EXPECT_EQ(md->model_name, "my_mnist");
  EXPECT_EQ(md->versions.size(), 2u);
  EXPECT_EQ(md->ReplicasOf(md->versions[0]), 2);
  EXPECT_EQ(md->ReplicasOf(md->versions[1]), 1);
  EXPECT_EQ(md->traffic.at("v1"), 90);
  EXPECT_EQ(md->router_replicas, 2);
  EXPECT_EQ(md->router_service_type, "ClusterIP");
  EXPECT_FALSE(md->RequestsGpu());
}

TEST(SpecTest, DefaultsModelNameAndEvenTraffic) {
  auto obj = SampleModelDeployment();
  obj["spec"].erase("modelName");
  obj["spec"].erase("traffic");
  obj["spec"]["versions"].push_back({{"name", "v3"}, {"storageUri", "file:///m/3"}});
  auto md = ParseModelDeployment(obj);
  ASSERT_TRUE(md.ok()) << md.status().message();
  EXPECT_EQ(md->model_name, "mnist");
  EXPECT_EQ(md->traffic.at("v1"), 34);
  EXPECT_EQ(md->traffic.at("v2"), 33);
  EXPECT_EQ(md->traffic.at("v3"), 33);
}

struct BadSpec {
  const char* name;
  const char* patch;     // JSON merge-patched onto the sample's spec
  const char* expected;  // substring of the error
};

class BadSpecTest : public ::testing::TestWithParam<BadSpec> {};

TEST_P(BadSpecTest, IsRejectedWithAClearMessage) {
  auto obj = SampleModelDeployment();
  obj["spec"].merge_patch(nlohmann::json::parse(GetParam().patch));
  auto md = ParseModelDeployment(obj);
  ASSERT_FALSE(md.ok());
  EXPECT_EQ(md.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(md.status().message().find(GetParam().expected), std::string::npos) << md.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Table, BadSpecTest,
    ::testing::Values(
        BadSpec{"traffic_sum", R"({"traffic": {"v1": 50, "v2": 10}})", "sum to 60"},
        BadSpec{"traffic_unknown", R"({"traffic": {"v1": 90, "v9": 10}})", "'v9', which is not in spec.versions"},
        BadSpec{"traffic_type", R"({"traffic": {"v1": "90", "v2": 10}})", "spec.traffic.v1"},
        BadSpec{"no_versions", R"({"versions": []})", "at least one version"},
        BadSpec{
            "dup_version",
            R"({"versions": [{"name": "v1", "storageUri": "file:///a"}, {"name": "v1", "storageUri": "file:///b"}], "traffic": null})",
            "twice"},
        BadSpec{"bad_scheme", R"({"versions": [{"name": "v1", "storageUri": "s3://bucket/m"}], "traffic": null})",
                "must start with pvc://"},
        BadSpec{"relative_file", R"({"versions": [{"name": "v1", "storageUri": "file://relative"}], "traffic": null})",
                "must start with"},
        BadSpec{"bad_version_name", R"({"versions": [{"name": "V_1", "storageUri": "file:///a"}], "traffic": null})",
                "DNS label"},
        BadSpec{"bad_sha",
                R"({"versions": [{"name": "v1", "storageUri": "file:///a", "sha256": "abc"}], "traffic": null})",
                "64 hexadecimal"},
        BadSpec{"negative_replicas", R"({"replicas": -1})", "spec.replicas is -1"},
        BadSpec{"route_version", R"({"routes": [{"match": {"header": "x", "value": "b"}, "version": "v7"}]})",
                "spec.routes[0].version 'v7'"},
        BadSpec{"route_header", R"({"routes": [{"match": {"header": "", "value": "b"}, "version": "v1"}]})",
                "header must not be empty"},
        BadSpec{"sticky_both", R"({"stickyBy": {"header": "u", "cookie": "c"}})", "both a header and a cookie"},
        BadSpec{"mirror_version", R"({"mirror": {"version": "v9"}})", "spec.mirror.version 'v9'"},
        BadSpec{"mirror_percent", R"({"mirror": {"version": "v2", "percent": 101}})", "percent is 101"},
        BadSpec{"service_type", R"({"router": {"serviceType": "ExternalName"}})", "ExternalName"},
        BadSpec{"batching_size", R"({"server": {"batching": {"maxBatchSize": 0}}})", "maxBatchSize is 0"},
        BadSpec{"pod_template", R"({"server": {"podTemplate": {"spec": []}}})", "podTemplate.spec must be an object"},
        BadSpec{"model_name", R"({"modelName": "../etc"})", "spec.modelName"},
        BadSpec{"spec_not_object", R"({"versions": "v1"})", "spec.versions"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(SpecTest, RejectsNamesThatDoNotFitAService) {
  auto obj = SampleModelDeployment();
  obj["metadata"]["name"] = "9lives";
  EXPECT_FALSE(ParseModelDeployment(obj).ok());
  obj["metadata"]["name"] = std::string(61, 'a');
  auto md = ParseModelDeployment(obj);
  ASSERT_FALSE(md.ok());
  EXPECT_NE(md.status().message().find("DNS-1035"), std::string::npos);
  obj["metadata"]["name"] = std::string(57, 'a');  // fits "-v1" but not "-router"
  md = ParseModelDeployment(obj);
  ASSERT_FALSE(md.ok());
  EXPECT_NE(md.status().message().find("-router"), std::string::npos);
}

TEST(SpecTest, RejectsObjectsWithoutIdentity) {
  EXPECT_FALSE(ParseModelDeployment(nlohmann::json::array()).ok());
  auto obj = SampleModelDeployment();
  obj["metadata"].erase("uid");
  EXPECT_FALSE(ParseModelDeployment(obj).ok());
  obj = SampleModelDeployment();
  obj.erase("spec");
  EXPECT_FALSE(ParseModelDeployment(obj).ok());
}

TEST(SpecTest, GpuRequestsAreSeenInLimitsOrRequests) {
  auto obj = SampleModelDeployment();
  obj["spec"]["server"] = {{"resources", {{"limits", {{"nvidia.com/gpu", 1}}}}}};
  EXPECT_TRUE(ParseModelDeployment(obj)->RequestsGpu());
  obj["spec"]["server"] = {{"resources", {{"requests", {{"nvidia.com/gpu", "2"}}}}}};
  EXPECT_TRUE(ParseModelDeployment(obj)->RequestsGpu());
  obj["spec"]["server"] = {{"resources", {{"limits", {{"nvidia.com/gpu", 0}}}}}};
  EXPECT_FALSE(ParseModelDeployment(obj)->RequestsGpu());
}

TEST(SpecTest, VersionNumbers) {
  EXPECT_EQ(VersionNumber("v2"), 2);
  EXPECT_EQ(VersionNumber("0003"), 3);
  EXPECT_EQ(VersionNumber("canary"), 1);
  EXPECT_EQ(VersionNumber("v0"), 1);
  EXPECT_EQ(VersionNumber("v12345678901234567890"), 1);
}

}  // namespace
}  // namespace mf::op
