// Whether a mirrored version answered a gRPC inference call like the primary: the same grpc-status,
// and for TF Serving Predict and KServe v2 ModelInfer the same output tensors (names, types,
// shapes, values within the numeric tolerance of mirror_compare.h, whichever of the proto's value
// fields or raw bytes each side used). The model spec / name / version the answers carry differ
// between versions by design and are not compared. Other methods, compressed messages and
// anything that does not decode must match byte for byte. Pure; both answers are untrusted input
// (never throws).
#pragma once

#include <string_view>

#include "server/router/mirror_compare.h"

namespace mf::router {

// `path` is the call's :path (e.g. "/tensorflow.serving.PredictionService/Predict"); the bodies
// are the responses' DATA as received (length-prefixed gRPC messages).
bool GrpcResponsesAgree(std::string_view path, int primary_code, std::string_view primary_body, int mirror_code,
                        std::string_view mirror_body, double tolerance = kMirrorTolerance);

}  // namespace mf::router
