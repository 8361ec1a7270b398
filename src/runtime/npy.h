// NumPy .npy files (format versions 1-3, little-endian, C order) <-> Tensor: what the CLI reads
// as inputs and writes as outputs, and what Python test harnesses exchange with us.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "runtime/tensor.h"

namespace mf::runtime {

// Parses .npy bytes; INVALID_ARGUMENT for malformed headers, Fortran order, big-endian or
// unsupported dtypes, or data shorter/longer than the shape says.
StatusOr<Tensor> ParseNpy(std::string_view bytes);
StatusOr<Tensor> ReadNpyFile(const std::string& path);

std::string SerializeNpy(const Tensor& t);  // version 1.0
Status WriteNpyFile(const std::string& path, const Tensor& t);

}  // namespace mf::runtime
