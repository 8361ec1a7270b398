#include "tools/local/apiserver/protobuf_body.h"

#include <gtest/gtest.h>

namespace mf::local {
namespace {

// Minimal protobuf writer for building test messages.
std::string Varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
  return out;
}
std::string Bytes(int field, const std::string& value) { return Varint((field << 3) | 2) + Varint(value.size()) + value; }
std::string MapEntry(int field, const std::string& k, const std::string& v) { return Bytes(field, Bytes(1, k) + Bytes(2, v)); }

std::string Envelope(const std::string& api_version, const std::string& kind, const std::string& raw) {
  return std::string("k8s\0", 4) + Bytes(1, Bytes(1, api_version) + Bytes(2, kind)) + Bytes(2, raw);
}

TEST(ProtobufBodyTest, DecodesANamespaceAsKubectlCreateSendsIt) {
  std::string meta = Bytes(1, "ml") + MapEntry(11, "team", "a") + MapEntry(12, "note", "x");
  auto ns = DecodeKubernetesProtobuf(Envelope("v1", "Namespace", Bytes(1, meta) + Bytes(2, "") + Bytes(3, "")));
  ASSERT_TRUE(ns.ok()) << ns.status().ToString();
  EXPECT_EQ((*ns)["kind"], "Namespace");
  EXPECT_EQ((*ns)["apiVersion"], "v1");
  EXPECT_EQ((*ns)["metadata"]["name"], "ml");
  EXPECT_EQ((*ns)["metadata"]["labels"]["team"], "a");
  EXPECT_EQ((*ns)["metadata"]["annotations"]["note"], "x");
}

TEST(ProtobufBodyTest, DecodesConfigMapAndSecretData) {
  auto cm = DecodeKubernetesProtobuf(Envelope("v1", "ConfigMap", Bytes(1, Bytes(1, "c")) + MapEntry(2, "k", "v")));
  ASSERT_TRUE(cm.ok());
  EXPECT_EQ((*cm)["data"]["k"], "v");
  auto secret = DecodeKubernetesProtobuf(Envelope("v1", "Secret", Bytes(1, Bytes(1, "s")) + MapEntry(2, "pw", "hi!") + Bytes(3, "Opaque")));
  ASSERT_TRUE(secret.ok());
  EXPECT_EQ((*secret)["data"]["pw"], "aGkh");
  EXPECT_EQ((*secret)["type"], "Opaque");
}

TEST(ProtobufBodyTest, DecodesADeploymentWithItsPodTemplate) {
  std::string container = Bytes(1, "web") + Bytes(2, "nginx") + Bytes(8, MapEntry(1, "cpu", Bytes(1, "500m")));
  std::string pod_spec = Bytes(2, container);
  std::string labels = MapEntry(11, "app", "web");
  std::string spec = Varint(1 << 3) + Varint(2) + Bytes(2, MapEntry(1, "app", "web")) +
                     Bytes(3, Bytes(1, labels) + Bytes(2, pod_spec)) +
                     Bytes(4, Bytes(2, Bytes(1, Varint(1 << 3) + Varint(1) + Bytes(3, "25%"))));
  auto d = DecodeKubernetesProtobuf(Envelope("apps/v1", "Deployment", Bytes(1, Bytes(1, "web") + labels) + Bytes(2, spec)));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ((*d)["spec"]["replicas"], 2);
  EXPECT_EQ((*d)["spec"]["selector"]["matchLabels"]["app"], "web");
  EXPECT_EQ((*d)["spec"]["template"]["spec"]["containers"][0]["image"], "nginx");
  EXPECT_EQ((*d)["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"], "500m");
  EXPECT_EQ((*d)["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"], "25%");
}

TEST(ProtobufBodyTest, RejectsMalformedAndUnknownInput) {
  EXPECT_EQ(DecodeKubernetesProtobuf("{}").status().code(), StatusCode::kInvalidArgument);
  std::string good = Envelope("v1", "Namespace", Bytes(1, Bytes(1, "ml")));
  for (size_t cut = 5; cut < good.size(); ++cut) {
    auto truncated = DecodeKubernetesProtobuf(good.substr(0, cut));
    EXPECT_FALSE(truncated.ok() && (*truncated)["metadata"].value("name", "") == "ml") << cut;
  }
  EXPECT_EQ(DecodeKubernetesProtobuf(Envelope("apps/v1", "StatefulSet", "")).status().code(), StatusCode::kUnimplemented);
  std::string huge_length = std::string("k8s\0", 4) + Varint((2 << 3) | 2) + Varint(1ull << 40);
  EXPECT_EQ(DecodeKubernetesProtobuf(huge_length).status().code(), StatusCode::kInvalidArgument);
}

// Found by local_protobuf_body_fuzzer: a string field with bytes that are not UTF-8 used to be
// decoded into a JSON string that the server could not serialize (nlohmann throws on dump).
TEST(ProtobufBodyTest, RejectsStringsThatAreNotUtf8) {
  auto bad_name = DecodeKubernetesProtobuf(Envelope("apps/v1", "Deployment", Bytes(1, Bytes(1, "\xde"))));
  ASSERT_FALSE(bad_name.ok());
  EXPECT_EQ(bad_name.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad_name.status().message().find("not valid UTF-8"), std::string::npos);
  EXPECT_FALSE(DecodeKubernetesProtobuf(Envelope("v1", "ConfigMap", MapEntry(2, "k", "\xc0\xaf"))).ok());  // overlong '/'
  EXPECT_FALSE(DecodeKubernetesProtobuf(Envelope("v1", "ConfigMap", MapEntry(2, "\xed\xa0\x80", "v"))).ok());  // surrogate
  EXPECT_FALSE(DecodeKubernetesProtobuf(Envelope("v1\xff", "Namespace", "")).ok());
  // Well-formed multi-byte text and arbitrary bytes in bytes fields still decode.
  auto cm = DecodeKubernetesProtobuf(Envelope("v1", "ConfigMap", MapEntry(2, "k", "caf\xc3\xa9 \xf0\x9f\x9a\x80") +
                                                                       MapEntry(3, "bin", std::string("\xff\x00", 2))));
  ASSERT_TRUE(cm.ok()) << cm.status().ToString();
  EXPECT_EQ((*cm)["data"]["k"], "caf\xc3\xa9 \xf0\x9f\x9a\x80");
  EXPECT_EQ((*cm)["binaryData"]["bin"], "/wA=");
  EXPECT_NO_THROW((void)cm->dump());
}

}  // namespace
}  // namespace mf::local
