// A tensor with the name it travels under on the wire. Decoders produce NamedTensor (owning);
// encoders take NamedTensorView (borrowing) so callers need not copy outputs to write them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "runtime/session.h"
#include "runtime/tensor.h"

namespace mf::codec {

struct NamedTensor {
  std::string name;
  runtime::Tensor tensor;
};

struct NamedTensorView {
  std::string_view name;
  const runtime::Tensor* tensor = nullptr;
};

// Matches named request inputs to a signature's declared inputs and returns them in the
// signature's order (the order Session::Run takes). Every declared input must be present exactly
// once, with the declared dtype, rank and every fixed (non -1) dim; anything else is
// INVALID_ARGUMENT naming the input, and `inputs` is left untouched in that case.
StatusOr<std::vector<runtime::Tensor>> BindInputs(const std::vector<runtime::TensorInfo>& declared,
                                                  std::vector<NamedTensor>&& inputs);

// Checks a tensor against one declared input: dtype, rank and fixed dims.
Status CheckAgainstDeclared(const runtime::TensorInfo& declared, const runtime::Tensor& tensor);

}  // namespace mf::codec
