// The URL grammars of the two REST APIs, parsed without regexes and with TF Serving's errors:
//
//   TF Serving (case-insensitive; model name and label percent-decoded):
//     POST /v1/models/{m}[/versions/{v}|/labels/{l}]:(predict|classify|regress)
//     GET  /v1/models/{m}[/versions/{v}|/labels/{l}][/metadata]
//   KServe v2:
//     GET  /v2 | /v2/health/live | /v2/health/ready
//     GET  /v2/models/{m}[/versions/{v}][/ready|/config]   (config: Triton's model configuration)
//     POST /v2/models/{m}[/versions/{v}]/infer
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace mf::server::rest {

struct TfServingPath {
  enum class Kind { kStatus, kMetadata, kPredict, kClassify, kRegress };
  Kind kind = Kind::kStatus;
  std::string model;
  std::optional<int64_t> version;
  std::optional<std::string> label;
};

// `path` is the request path without the query. INVALID_ARGUMENT with TF Serving's messages:
// "Missing model name in request." and "Malformed request: <METHOD> <path>".
StatusOr<TfServingPath> ParseTfServingPath(std::string_view method, std::string_view path);

struct V2Path {
  enum class Kind { kServerMetadata, kLive, kReady, kModelMetadata, kModelReady, kModelConfig, kInfer };
  Kind kind = Kind::kServerMetadata;
  std::string model;
  std::optional<int64_t> version;
};

// NOT_FOUND for paths outside the grammar, INVALID_ARGUMENT for a version that is not an int64.
StatusOr<V2Path> ParseV2Path(std::string_view method, std::string_view path);

// %XX decoding ('+' stays '+': it is a path, not a form). INVALID_ARGUMENT on a bad escape.
StatusOr<std::string> PercentDecode(std::string_view text);

}  // namespace mf::server::rest
