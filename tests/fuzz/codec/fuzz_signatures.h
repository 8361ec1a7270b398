// Signatures the codec fuzzers parse against: every dtype, one-input and several-input models,
// fixed and open dims, so one corpus reaches every branch of the REST decoders.
#pragma once

#include <vector>

#include "server/codec/model_info.h"

namespace mf::codec::fuzz {

inline std::vector<ModelSignature> Signatures() {
  using runtime::DataType;
  std::vector<ModelSignature> sigs(3);
  sigs[0].inputs = {{"x", DataType::kFloat32, {-1, -1}}};
  sigs[1].name = "multi";
  sigs[1].inputs = {
      {"ids", DataType::kInt64, {-1, 2}}, {"mask", DataType::kBool, {-1}},  {"text", DataType::kString, {-1}},
      {"h", DataType::kFloat16, {-1}},    {"b", DataType::kBFloat16, {-1}}, {"d", DataType::kFloat64, {-1}},
      {"i8", DataType::kInt8, {-1}},      {"u8", DataType::kUInt8, {-1}},   {"i16", DataType::kInt16, {-1}},
      {"u16", DataType::kUInt16, {-1}},   {"i32", DataType::kInt32, {-1}},  {"u32", DataType::kUInt32, {-1}},
      {"u64", DataType::kUInt64, {-1}}};
  sigs[2].name = "strings";
  sigs[2].inputs = {{"s", DataType::kString, {}}};
  return sigs;
}

}  // namespace mf::codec::fuzz
