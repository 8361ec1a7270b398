#include "server/repository/servable.h"

#include <utility>

namespace mf::server {

void Servable::RunAsync(std::vector<runtime::Tensor> inputs, Done done, StillWanted still_wanted) const {
  if (still_wanted) {
    if (Status wanted = still_wanted(std::chrono::steady_clock::now()); !wanted.ok())
      return done(std::move(wanted), {});
  }
  std::vector<const runtime::Tensor*> pointers;
  pointers.reserve(inputs.size());
  for (const auto& t : inputs) pointers.push_back(&t);
  Outputs outputs;
  Status status = Run(pointers, &outputs);
  done(std::move(status), std::move(outputs));
}

Status Servable::MeetsDeadline(std::chrono::steady_clock::time_point deadline,
                               std::chrono::steady_clock::time_point expected_end) {
  if (deadline <= std::chrono::steady_clock::now()) {
    return DeadlineExceeded("Deadline exceeded before the model run started");
  }
  if (deadline <= expected_end) {
    return DeadlineExceeded(
        "Deadline exceeded: the model run would end after it (queued past the point of "
        "answering in time)");
  }
  return Status::Ok();
}

StatusOr<runtime::Tensor> Servable::AllocateInput(runtime::DataType dtype, runtime::Shape shape) const {
  return runtime::Tensor::AllocateUninitialized(dtype, std::move(shape));
}

}  // namespace mf::server
