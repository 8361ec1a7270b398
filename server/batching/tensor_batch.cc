#include "server/batching/tensor_batch.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace mf::server::batching {
namespace {

// Elements in one row (the product of the dims after dim 0).
int64_t RowElements(const runtime::Shape& shape) {
  runtime::Shape row(shape.begin() + 1, shape.end());
  return runtime::NumElements(row);
}

}  // namespace

bool SameBatchShape(const runtime::Tensor& a, const runtime::Tensor& b) {
  if (a.dtype() != b.dtype() || a.rank() != b.rank() || a.rank() < 1) return false;
  for (int i = 1; i < a.rank(); ++i) {
    if (a.dim(i) != b.dim(i)) return false;
  }
  return true;
}

StatusOr<runtime::Tensor> ConcatAndPad(const std::vector<const runtime::Tensor*>& parts, int64_t pad_rows) {
  if (parts.empty() || pad_rows < 0) return InvalidArgument("ConcatAndPad: nothing to batch");
  const runtime::Tensor& first = *parts.front();
  int64_t rows = pad_rows;
  for (const runtime::Tensor* part : parts) {
    if (!SameBatchShape(first, *part)) {
      return InvalidArgument("cannot batch tensors of shapes " + runtime::ShapeToString(first.shape()) + " and " +
                             runtime::ShapeToString(part->shape()));
    }
    rows += part->dim(0);
  }
  if (first.dim(0) < 1 && pad_rows > 0) return InvalidArgument("cannot pad from an empty tensor");
  runtime::Shape shape = first.shape();
  shape[0] = rows;
  MF_ASSIGN_OR_RETURN(runtime::Tensor batch, runtime::Tensor::Allocate(first.dtype(), shape));
  const int64_t row_elements = RowElements(first.shape());

  if (first.dtype() == runtime::DataType::kString) {
    auto& out = batch.strings();
    size_t at = 0;
    for (const runtime::Tensor* part : parts) {
      for (const std::string& s : part->strings()) out[at++] = s;
    }
    for (int64_t p = 0; p < pad_rows; ++p) {
      for (int64_t e = 0; e < row_elements; ++e) out[at++] = first.strings()[static_cast<size_t>(e)];
    }
    return batch;
  }
  const size_t row_bytes = static_cast<size_t>(row_elements) * runtime::ElementSize(first.dtype());
  char* out = static_cast<char*>(batch.raw_data());
  for (const runtime::Tensor* part : parts) {
    if (part->byte_size() > 0) std::memcpy(out, part->raw_data(), part->byte_size());
    out += part->byte_size();
  }
  for (int64_t p = 0; p < pad_rows; ++p) {
    std::memcpy(out, first.raw_data(), row_bytes);
    out += row_bytes;
  }
  return batch;
}

StatusOr<runtime::Tensor> SliceRows(const runtime::Tensor& batch, int64_t begin, int64_t rows) {
  if (batch.rank() < 1 || begin < 0 || rows < 0 || begin + rows > batch.dim(0)) {
    return Internal("model output of shape " + runtime::ShapeToString(batch.shape()) + " does not have rows [" +
                    std::to_string(begin) + ", " + std::to_string(begin + rows) + ") of the batch");
  }
  runtime::Shape shape = batch.shape();
  shape[0] = rows;
  MF_ASSIGN_OR_RETURN(runtime::Tensor slice, runtime::Tensor::Allocate(batch.dtype(), shape));
  const int64_t row_elements = RowElements(batch.shape());
  if (batch.dtype() == runtime::DataType::kString) {
    auto from = batch.strings().begin() + begin * row_elements;
    std::copy(from, from + rows * row_elements, slice.strings().begin());
    return slice;
  }
  const size_t row_bytes = static_cast<size_t>(row_elements) * runtime::ElementSize(batch.dtype());
  if (slice.byte_size() > 0) {
    std::memcpy(slice.raw_data(), static_cast<const char*>(batch.raw_data()) + begin * row_bytes, slice.byte_size());
  }
  return slice;
}

}  // namespace mf::server::batching
