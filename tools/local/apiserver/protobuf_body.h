// Decodes the Kubernetes protobuf wire format ("k8s\0" magic + runtime.Unknown envelope) that some
// kubectl commands send without a JSON fallback (kubectl create namespace / configmap / secret /
// serviceaccount), into the JSON object the rest of the server handles. Other kinds are answered
// 415 with a clear message. The input is untrusted: every length is bounds-checked.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace mf::local {

inline constexpr std::string_view kProtobufContentType = "application/vnd.kubernetes.protobuf";

// UNIMPLEMENTED for a kind this decoder does not know; INVALID_ARGUMENT for malformed bytes.
StatusOr<nlohmann::json> DecodeKubernetesProtobuf(std::string_view body);

}  // namespace mf::local
