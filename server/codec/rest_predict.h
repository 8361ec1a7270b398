// TF Serving's REST predict body, strictly as TF Serving reads and writes it (COMPAT.md):
//
//   request  {"signature_name"?: "...", "instances": <row form>}  or  {..., "inputs": <columnar>}
//   response {"predictions": ...} (row form)                      or  {"outputs": ...}
//
// Types and shapes come from the signature, not from the JSON: floats accept any JSON number and
// NaN / Infinity / -Infinity, integer inputs need JSON integers in range, bool inputs true/false,
// string inputs JSON strings or {"b64": "..."}; nested lists must be rectangular and match the
// declared rank and fixed dims. Parsing uses simdjson, so large float arrays decode at hundreds of
// MB/s. Every error is INVALID_ARGUMENT with TF Serving's wording where it has one.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "runtime/tensor.h"
#include "server/codec/model_info.h"
#include "server/codec/named_tensor.h"

namespace mf::codec {

enum class RestFormat {
  kRow,       // "instances" in, "predictions" out
  kColumnar,  // "inputs" in, "outputs" out
};

struct RestPredictRequest {
  // The signature the request named ("serving_default" when it named none).
  const ModelSignature* signature = nullptr;
  RestFormat format = RestFormat::kRow;
  // One tensor per signature input, in signature->inputs order.
  std::vector<runtime::Tensor> inputs;
};

// Parses a predict body against the model's signatures (the request's signature_name picks one).
// An unknown signature name is INVALID_ARGUMENT "Serving signature name: \"x\" not found in
// signature def". The returned request points into `signatures`.
StatusOr<RestPredictRequest> ParseRestPredictRequest(std::string_view body, std::span<const ModelSignature> signatures);

// The same, in TF Serving's order: the body is parsed (a malformed one is INVALID_ARGUMENT
// "JSON Parse error: ...", whatever the model) and its signature_name read before `lookup` finds
// the model's signatures, whose error (NOT_FOUND for an unknown model) is returned as it is.
// The spans `lookup` returns must outlive the request.
using SignatureLookup = std::function<StatusOr<std::span<const ModelSignature>>()>;
StatusOr<RestPredictRequest> ParseRestPredictRequest(std::string_view body, const SignatureLookup& lookup);

// OK when `body` is one well-formed JSON document; else TF Serving's INVALID_ARGUMENT
// "JSON Parse error: ...". The predict parser reads lazily and finds a syntax error deep inside
// a tensor only while decoding it; this checks the whole body, for answers that must come
// before the model is looked up (an unknown model with a malformed body is still a 400).
Status CheckJsonSyntax(std::string_view body);

// Writes {"predictions": ...} or {"outputs": ...}. With one output the name is dropped; with
// several, columnar form writes an object name -> tensor and row form a list of per-row objects
// (every output must then share dim 0, else INVALID_ARGUMENT). Outputs whose name ends in
// "_bytes" are written as {"b64": "..."}. Floats are the shortest round-tripping form, whole
// numbers end in ".0", non-finite values are NaN / Infinity / -Infinity.
Status WriteRestPredictResponse(RestFormat format, std::span<const NamedTensorView> outputs, std::string* body);

// {"error": "<message>"}: TF Serving's REST error body.
std::string WriteRestError(std::string_view message);

}  // namespace mf::codec
