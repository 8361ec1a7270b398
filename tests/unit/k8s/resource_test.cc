#include "k8s/resource.h"

#include <gtest/gtest.h>

namespace mf::k8s {
namespace {

StatusOr<std::string> PathOf(GroupVersionResource gvr, std::string ns, std::string name, std::string sub) {
  return ResourceRef{std::move(gvr), std::move(ns), std::move(name), std::move(sub)}.Path();
}

TEST(ResourceRefTest, CoreGroupLivesUnderApi) {
  auto path = ResourceRef{resources::Pods(), "ml", "web-0", ""}.Path();
  ASSERT_TRUE(path.ok()) << path.status().ToString();
  EXPECT_EQ(*path, "/api/v1/namespaces/ml/pods/web-0");
}

TEST(ResourceRefTest, NamedGroupLivesUnderApisWithSubresource) {
  auto path = ResourceRef{resources::Deployments(), "ml", "web", "scale"}.Path();
  ASSERT_TRUE(path.ok());
  EXPECT_EQ(*path, "/apis/apps/v1/namespaces/ml/deployments/web/scale");
  EXPECT_EQ(*PathOf(resources::ModelDeployments(), "", "", ""), "/apis/modelfleet.io/v1alpha1/modeldeployments");
  EXPECT_EQ(*PathOf(resources::Namespaces(), "", "ml", ""), "/api/v1/namespaces/ml");
}

TEST(ResourceRefTest, RejectsMalformedSegments) {
  EXPECT_EQ(PathOf(resources::Pods(), "ml", "../secrets", "").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PathOf(resources::Pods(), "ml", "..", "").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PathOf(resources::Pods(), "m l", "x", "").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PathOf(resources::Pods(), "ml", "x?watch=true", "").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PathOf(resources::Pods(), "ml", "", "status").status().code(), StatusCode::kInvalidArgument);
  auto cluster_scoped = ResourceRef{resources::Namespaces(), "ml", "x", ""}.Path();
  EXPECT_EQ(cluster_scoped.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(cluster_scoped.status().message().find("cluster-scoped"), std::string::npos);
}

TEST(ResourceRefTest, GvrNamesReadLikeKubectl) {
  EXPECT_EQ(resources::Pods().ToString(), "pods");
  EXPECT_EQ(resources::Leases().ToString(), "leases.coordination.k8s.io");
}

TEST(UrlEncodeTest, EncodesReservedCharacters) {
  EXPECT_EQ(UrlEncode("app=web,tier in (a,b)"), "app%3Dweb%2Ctier%20in%20%28a%2Cb%29");
  EXPECT_EQ(UrlEncode("a-b_c.d~"), "a-b_c.d~");
}

}  // namespace
}  // namespace mf::k8s
