#include "server/rest/rest_paths.h"

#include <gtest/gtest.h>

namespace mf::server::rest {
namespace {

using K = TfServingPath::Kind;

TEST(ParseTfServingPathTest, AcceptedPaths) {
  struct Case {
    const char* method;
    const char* path;
    K kind;
    const char* model;
    std::optional<int64_t> version;
    std::optional<std::string> label;
  } cases[] = {
      {"GET", "/v1/models/m", K::kStatus, "m", {}, {}},
      {"GET", "/v1/models/m/versions/3", K::kStatus, "m", 3, {}},
      {"GET", "/v1/models/m/labels/stable", K::kStatus, "m", {}, "stable"},
      {"GET", "/v1/models/m/metadata", K::kMetadata, "m", {}, {}},
      {"GET", "/V1/Models/m/Versions/7/METADATA", K::kMetadata, "m", 7, {}},
      {"POST", "/v1/models/m:predict", K::kPredict, "m", {}, {}},
      {"POST", "/v1/models/m/versions/2:PREDICT", K::kPredict, "m", 2, {}},
      {"POST", "/v1/models/m/labels/canary:predict", K::kPredict, "m", {}, "canary"},
      {"POST", "/v1/models/m:classify", K::kClassify, "m", {}, {}},
      {"POST", "/v1/models/m:regress", K::kRegress, "m", {}, {}},
      {"GET", "/v1/models/my%20model", K::kStatus, "my model", {}, {}},
  };
  for (const Case& c : cases) {
    auto parsed = ParseTfServingPath(c.method, c.path);
    ASSERT_TRUE(parsed.ok()) << c.path << ": " << parsed.status().ToString();
    EXPECT_EQ(parsed->kind, c.kind) << c.path;
    EXPECT_EQ(parsed->model, c.model) << c.path;
    EXPECT_EQ(parsed->version, c.version) << c.path;
    EXPECT_EQ(parsed->label, c.label) << c.path;
  }
}

TEST(ParseTfServingPathTest, ErrorsUseTfServingWording) {
  struct Case {
    const char* method;
    const char* path;
    const char* message;
  } cases[] = {
      {"GET", "/v1/models", "Missing model name in request."},
      // TF Serving's grammars: GET may omit the name (its status handler then says it is missing);
      // POST may not, and neither may end in a slash.
      {"GET", "/v1/models/", "Malformed request: GET /v1/models/"},
      {"POST", "/v1/models", "Malformed request: POST /v1/models"},
      {"POST", "/v1/models/", "Malformed request: POST /v1/models/"},
      {"POST", "/v1/models/:predict", "Malformed request: POST /v1/models/:predict"},
      {"POST", "/v1/models/m/versions/1/labels/x:predict",
       "Malformed request: POST /v1/models/m/versions/1/labels/x:predict"},
      {"GET", "/v1/models/m/versions/1/labels/x", "Malformed request: GET /v1/models/m/versions/1/labels/x"},
      {"GET", "/v1/models/m/versions/abc", "Malformed request: GET /v1/models/m/versions/abc"},
      // Digits that overflow int64 match the grammar and then fail to convert, as in TF Serving...
      {"GET", "/v1/models/m/versions/99999999999999999999",
       "Failed to convert version: 99999999999999999999 to numeric."},
      {"POST", "/v1/models/m/versions/9223372036854775808:predict",
       "Failed to convert version: 9223372036854775808 to numeric."},
      // ...unless the rest of the path does not match.
      {"GET", "/v1/models/m/versions/99999999999999999999/other",
       "Malformed request: GET /v1/models/m/versions/99999999999999999999/other"},
      {"POST", "/v1/models/m", "Malformed request: POST /v1/models/m"},
      {"POST", "/v1/models/m:explain", "Malformed request: POST /v1/models/m:explain"},
      {"GET", "/v1/models/m:predict", "Malformed request: GET /v1/models/m:predict"},
      {"GET", "/v1/models/m/other", "Malformed request: GET /v1/models/m/other"},
      {"DELETE", "/v1/models/m", "Malformed request: DELETE /v1/models/m"},
      {"GET", "/v1/modelsx", "Malformed request: GET /v1/modelsx"},
  };
  for (const Case& c : cases) {
    auto parsed = ParseTfServingPath(c.method, c.path);
    ASSERT_FALSE(parsed.ok()) << c.path;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << c.path;
    EXPECT_EQ(parsed.status().message(), c.message) << c.path;
  }
  EXPECT_FALSE(ParseTfServingPath("GET", "/v1/models/bad%zzname").ok());
}

TEST(ParseV2PathTest, Table) {
  using V = V2Path::Kind;
  struct Case {
    const char* method;
    const char* path;
    bool ok;
    V kind;
    const char* model;
    std::optional<int64_t> version;
  } cases[] = {
      {"GET", "/v2", true, V::kServerMetadata, "", {}},
      {"GET", "/v2/health/live", true, V::kLive, "", {}},
      {"GET", "/v2/health/ready", true, V::kReady, "", {}},
      {"GET", "/v2/models/m", true, V::kModelMetadata, "m", {}},
      {"GET", "/v2/models/m/versions/4", true, V::kModelMetadata, "m", 4},
      {"GET", "/v2/models/m/ready", true, V::kModelReady, "m", {}},
      {"GET", "/v2/models/m/versions/4/ready", true, V::kModelReady, "m", 4},
      {"GET", "/v2/models/m/config", true, V::kModelConfig, "m", {}},
      {"GET", "/v2/models/m/versions/4/config", true, V::kModelConfig, "m", 4},
      {"POST", "/v2/models/m/config", false, V::kInfer, "", {}},
      {"POST", "/v2/models/m/infer", true, V::kInfer, "m", {}},
      {"POST", "/v2/models/m/versions/2/infer", true, V::kInfer, "m", 2},
      {"GET", "/v2/models/m/infer", false, V::kInfer, "", {}},
      {"POST", "/v2/models/m/ready", false, V::kInfer, "", {}},
      {"GET", "/v2/health/other", false, V::kInfer, "", {}},
      {"GET", "/v2/models", false, V::kInfer, "", {}},
      {"GET", "/v2/models/m/versions/x/ready", false, V::kInfer, "", {}},
  };
  for (const Case& c : cases) {
    auto parsed = ParseV2Path(c.method, c.path);
    EXPECT_EQ(parsed.ok(), c.ok) << c.method << " " << c.path;
    if (!parsed.ok() || !c.ok) continue;
    EXPECT_EQ(parsed->kind, c.kind) << c.path;
    EXPECT_EQ(parsed->model, c.model) << c.path;
    EXPECT_EQ(parsed->version, c.version) << c.path;
  }
}

}  // namespace
}  // namespace mf::server::rest
