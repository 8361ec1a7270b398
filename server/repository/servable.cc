#include "server/repository/servable.h"

#include <utility>

namespace mf::server {

void Servable::RunAsync(std::vector<runtime::Tensor> inputs, Done done, StillWanted still_wanted) const {
  if (still_wanted) {
    if (Status wanted = still_wanted(std::chrono::steady_clock::now()); !wanted.ok()) return done(std::move(wanted), {});
  }
  std::vector<const runtime::Tensor*> pointers;
  pointers.reserve(inputs.size());
  for (const auto& t : inputs) pointers.push_back(&t);
  Outputs outputs;
  Status status = Run(pointers, &outputs);
  done(std::move(status), std::move(outputs));
}

StatusOr<runtime::Tensor> Servable::AllocateInput(runtime::DataType dtype, runtime::Shape shape) const {
  return runtime::Tensor::AllocateUninitialized(dtype, std::move(shape));
}

}  // namespace mf::server
