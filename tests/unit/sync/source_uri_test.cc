// Table tests of the --source and --dest grammars, hostile inputs included. Also built with
// ASan+UBSan (sync_source_uri_sanitized_test): these strings come from users' ModelDeployments.
#include "server/sync/source_uri.h"

#include <gtest/gtest.h>

#include <string>

namespace mf::sync {
namespace {

struct Accepted {
  std::string uri;
  Source::Kind kind;
  std::string path;  // kLocal
  std::string root;  // kLocal
  std::string url;   // kHttp
  std::string file_name;
};

TEST(ParseSource, AcceptsEachScheme) {
  using K = Source::Kind;
  const Accepted cases[] = {
      {"file:///models/resnet/1/model.onnx", K::kLocal, "/models/resnet/1/model.onnx", "/", "", ""},
      {"file://localhost/data/m", K::kLocal, "/data/m", "/", "", ""},
      {"FILE:///data/m", K::kLocal, "/data/m", "/", "", ""},
      {"file:///data//m/", K::kLocal, "/data/m", "/", "", ""},
      {"file:///data/my%20model.onnx", K::kLocal, "/data/my model.onnx", "/", "", ""},
      {"file:///data/..hidden/m", K::kLocal, "/data/..hidden/m", "/", "", ""},
      {"pvc://models-claim/resnet/3", K::kLocal, "/mnt/pvc/models-claim/resnet/3", "/mnt/pvc/models-claim", "", ""},
      {"pvc://claim", K::kLocal, "/mnt/pvc/claim", "/mnt/pvc/claim", "", ""},
      {"pvc://claim/", K::kLocal, "/mnt/pvc/claim", "/mnt/pvc/claim", "", ""},
      {"pvc://claim.v2/a%2Bb", K::kLocal, "/mnt/pvc/claim.v2/a+b", "/mnt/pvc/claim.v2", "", ""},
      {"http://127.0.0.1:8080/models/model.onnx?sig=abc", K::kHttp, "", "",
       "http://127.0.0.1:8080/models/model.onnx?sig=abc", "model.onnx"},
      {"HTTPS://example.com/a/b/model%2Bv2.onnx", K::kHttp, "", "", "https://example.com/a/b/model%2Bv2.onnx",
       "model+v2.onnx"},
      {"https://[::1]/m.onnx#frag", K::kHttp, "", "", "https://[::1]/m.onnx#frag", "m.onnx"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.uri);
    auto source = ParseSource(c.uri, "/mnt/pvc/");
    ASSERT_TRUE(source.ok()) << source.status().ToString();
    EXPECT_EQ(source->uri, c.uri);
    EXPECT_EQ(source->kind, c.kind);
    EXPECT_EQ(source->path.string(), c.path);
    EXPECT_EQ(source->root.string(), c.root);
    EXPECT_EQ(source->url, c.url);
    EXPECT_EQ(source->file_name, c.file_name);
  }
}

struct Refused {
  std::string uri;
  std::string message_part;
};

TEST(ParseSource, RefusesWithAReason) {
  const Refused cases[] = {
      {"", "--source is empty"},
      {"s3://bucket/model.onnx", "unsupported scheme 's3'; supported: file:///abs/path, pvc://CLAIM"},
      {"gs://bucket/model.onnx", "unsupported scheme 'gs'"},
      {"ftp://host/model.onnx", "unsupported scheme 'ftp'"},
      {"://host/model.onnx", "unsupported scheme ''"},
      {"models/resnet", "has no scheme; supported: file:///abs/path"},
      {"/abs/model.onnx", "has no scheme"},
      {"file:/abs/model.onnx", "has no scheme"},
      {"file://relative/path", "names a host or a relative path"},
      {"file://", "names a host or a relative path"},
      {"file:///", "names the filesystem root"},
      {"file:////", "names the filesystem root"},
      {"file:///data/../etc/passwd", "has a '..' segment"},
      {"file:///data/..", "has a '..' segment"},
      {"file:///data/%2e%2e/etc", "has a '..' segment"},
      {"file:///data/%2E%2e/etc", "has a '..' segment"},
      {"file:///data/./m", "has a '.' segment"},
      {"file:///data/%2e/m", "has a '.' segment"},
      {"file:///data/a%2Fb", "encodes '/' or a control character"},
      {"file:///data/a%00b", "encodes '/' or a control character"},
      {"file:///data/a%0ab", "encodes '/' or a control character"},
      {"file:///data/a%zz", "malformed percent-escape"},
      {"file:///data/a%4", "malformed percent-escape"},
      {"file:///data/a%", "malformed percent-escape"},
      {"file:///data/m?x=1", "has '?' or '#'"},
      {"file:///data/m#frag", "has '?' or '#'"},
      {std::string("file:///data/a\nb"), "contains a control character"},
      {std::string("file:///data/a\0b", 16), "contains a control character"},
      {"pvc://../etc", "does not start with a PersistentVolumeClaim name"},
      {"pvc://Claim/x", "does not start with a PersistentVolumeClaim name"},
      {"pvc:///abs", "does not start with a PersistentVolumeClaim name"},
      {"pvc://-bad/x", "does not start with a PersistentVolumeClaim name"},
      {"pvc://a..b/x", "does not start with a PersistentVolumeClaim name"},
      {"pvc://claim_x/x", "does not start with a PersistentVolumeClaim name"},
      {"pvc://" + std::string(254, 'a') + "/x", "does not start with a PersistentVolumeClaim name"},
      {"pvc://claim/../../etc/shadow", "has a '..' segment"},
      {"pvc://claim/%2e%2e/other-claim", "has a '..' segment"},
      {"pvc://claim/a/..", "has a '..' segment"},
      {"http://host/", "names no file"},
      {"http://host", "names no file"},
      {"http://host?x=1", "names no file"},
      {"http://host/dir/?x=/model.onnx", "names no file"},
      {"http://user:pw@host/m.onnx", "has user info"},
      {"http://host/%2e%2e", "has a '..' segment"},
      {"http://host/a%2F..", "encodes '/'"},
      {"http:///m.onnx", "has no host"},
      {"http://host:99999/m.onnx", "invalid port"},
      {"http://host/a b.onnx", "percent-encode it"},
      {"file:///" + std::string(9000, 'a'), "is longer than 8192 bytes"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.uri);
    auto source = ParseSource(c.uri, "/mnt/pvc");
    ASSERT_FALSE(source.ok());
    EXPECT_EQ(source.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(source.status().message().find(c.message_part), std::string::npos) << source.status().message();
  }
}

TEST(ParseSource, MessagesNameTheUriWithoutItsControlCharactersOrBulk) {
  auto source = ParseSource("s3://bucket/model.onnx", "/mnt/pvc");
  EXPECT_NE(source.status().message().find("'s3://bucket/model.onnx'"), std::string::npos);

  auto hostile = ParseSource("file:///a\r\nlevel=error msg=forged", "/mnt/pvc");
  ASSERT_FALSE(hostile.ok());
  EXPECT_EQ(hostile.status().message().find_first_of("\r\n"), std::string::npos);

  auto long_uri = ParseSource("s3://" + std::string(5000, 'b'), "/mnt/pvc");
  EXPECT_LT(long_uri.status().message().size(), 600u);
}

TEST(ParseSource, PvcNeedsAnAbsoluteRoot) {
  auto source = ParseSource("pvc://claim/x", "mnt/pvc");
  ASSERT_FALSE(source.ok());
  EXPECT_NE(source.status().message().find("--pvc-root must be an absolute path"), std::string::npos);
}

TEST(ParseDestination, AcceptsAbsoluteDirectories) {
  const std::pair<std::string, std::string> cases[] = {
      {"/models/m/1", "/models/m/1"},
      {"/models/m/1/", "/models/m/1"},
      {"//models//m", "/models/m"},
      {"/m", "/m"},
  };
  for (const auto& [dest, want] : cases) {
    auto path = ParseDestination(dest);
    ASSERT_TRUE(path.ok()) << dest << ": " << path.status().ToString();
    EXPECT_EQ(path->string(), want);
  }
}

TEST(ParseDestination, RefusesWithAReason) {
  const Refused cases[] = {
      {"", "--dest is empty"},
      {"models/m/1", "must be an absolute path"},
      {"/", "must name a directory below /"},
      {"///", "must name a directory below /"},
      {"/models/../etc", "must not have '.' or '..' segments"},
      {"/models/./m", "must not have '.' or '..' segments"},
      {"/models/m/..", "must not have '.' or '..' segments"},
      {"/models/a\nb", "contains a control character"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.uri);
    auto path = ParseDestination(c.uri);
    ASSERT_FALSE(path.ok());
    EXPECT_EQ(path.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(path.status().message().find(c.message_part), std::string::npos) << path.status().message();
  }
}

}  // namespace
}  // namespace mf::sync
