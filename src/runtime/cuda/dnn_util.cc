#include "runtime/cuda/dnn_util.h"

#include <limits>

namespace mf::runtime::cuda {

cudnnDataType_t CudnnType(DataType dtype) { return dtype == DataType::kFloat16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT; }

std::vector<int64_t> DenseStrides(const std::vector<int64_t>& dims, bool nhwc) {
  std::vector<int64_t> strides(dims.size(), 1);
  if (dims.size() < 3) {
    for (size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * dims[i];
    return strides;
  }
  if (!nhwc) {
    for (size_t i = dims.size() - 1; i-- > 0;) strides[i] = strides[i + 1] * dims[i + 1];
    return strides;
  }
  // Channels-last: C is innermost, then the spatial dims in order, then N.
  int64_t s = dims[1];
  strides[1] = 1;
  for (size_t i = dims.size() - 1; i >= 2; --i) {
    strides[i] = s;
    s *= dims[i];
  }
  strides[0] = s;
  return strides;
}

Status SetTensorDesc(TensorDesc* desc, DataType dtype, const TensorView& view) {
  if (view.dims.size() != view.strides.size() || view.dims.size() < 3 || view.dims.size() > CUDNN_DIM_MAX) {
    return Internal("tensor descriptor of rank " + std::to_string(view.dims.size()));
  }
  std::vector<int> dims, strides;
  for (size_t i = 0; i < view.dims.size(); ++i) {
    if (view.dims[i] <= 0 || view.dims[i] > std::numeric_limits<int>::max() || view.strides[i] <= 0 ||
        view.strides[i] > std::numeric_limits<int>::max()) {
      return InvalidArgument("tensor dims " + ShapeToString(view.dims) + " do not fit cuDNN's 32-bit sizes");
    }
    dims.push_back(static_cast<int>(view.dims[i]));
    strides.push_back(static_cast<int>(view.strides[i]));
  }
  while (dims.size() < 4) {  // cuDNN takes 4-D and up: a trailing unit dim changes nothing
    dims.push_back(1);
    strides.push_back(1);
  }
  if (!desc->get()) MF_CUDNN_RETURN_IF_ERROR(cudnnCreateTensorDescriptor(desc->out()));
  MF_CUDNN_RETURN_IF_ERROR(cudnnSetTensorNdDescriptor(desc->get(), CudnnType(dtype), static_cast<int>(dims.size()),
                                                      dims.data(), strides.data()));
  return Status::Ok();
}

Status CopyBox(DataType dtype, const TensorView& view_src, const void* src, const TensorView& view_dst, void* dst) {
  for (int64_t d : view_src.dims) {
    if (d == 0) return Status::Ok();
  }
  TensorDesc src_desc, dst_desc;
  MF_RETURN_IF_ERROR(SetTensorDesc(&src_desc, dtype, view_src));
  MF_RETURN_IF_ERROR(SetTensorDesc(&dst_desc, dtype, view_dst));
  const float one = 1.f, zero = 0.f;
  MF_CUDNN_RETURN_IF_ERROR(
      cudnnTransformTensor(Current().cudnn, &one, src_desc.get(), src, &zero, dst_desc.get(), dst));
  return Status::Ok();
}

}  // namespace mf::runtime::cuda
