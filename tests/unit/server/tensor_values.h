// A float tensor's values as a vector, to compare with a list in the batching tests.
#pragma once

#include <vector>

#include "runtime/tensor.h"

namespace mf::server::testing {

inline std::vector<float> FloatValues(const runtime::Tensor& t) {
  return {t.data<float>(), t.data<float>() + t.num_elements()};
}

}  // namespace mf::server::testing
