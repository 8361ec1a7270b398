// Conv and ConvTranspose on cuDNN's v9 legacy convolution API.
//
// Conv: cudnnConvolutionBiasActivationForward when the fused activation is ReLU (bias, residual
// and ReLU in the convolution kernel), else cudnnConvolutionForward, then bias and residual with
// cuDNN tensor ops and the activation with ApplyActivation. ConvTranspose:
// cudnnConvolutionBackwardData plus bias. Per input shape the kernel builds an immutable plan
// (descriptors, the heuristic's algorithm, padding/cropping boxes) cached behind a mutex.
//
// cuDNN only pads symmetrically: asymmetric pads (auto_pad SAME_* on some sizes, explicit pads)
// are realised by copying the input into a zero-filled larger buffer (Conv), or by computing a
// larger output and copying out the requested box (ConvTranspose). Channels-last tensors
// (Value::nhwc) are described by their strides; the filter is then repacked to KRSC at bind time.
#include <atomic>
#include <map>
#include <mutex>

#include "runtime/cuda/dnn_util.h"
#include "runtime/ops/conv_geometry.h"
#include "runtime/ops/indexing.h"

namespace mf::runtime::cuda {
namespace {

// The ONNX attributes (ops/conv_geometry.h) and how this kernel runs them.
struct ConvParams : ops::ConvAttributes {
  Activation act;
  bool fused_sum = false;  // input 3 is added to the output before `act`
  bool src_nhwc = false, addend_nhwc = false, dst_nhwc = false;
  bool has_bias = false;
  DataType dtype = DataType::kFloat32;
  Precision precision = Precision::kFp32;
};

using ops::ConvGeometry;

// cuDNN works on 2-D and 3-D convolutions: a 1-D one gets a leading unit spatial dim.
std::vector<int64_t> Promote(const std::vector<int64_t>& v, size_t spatial, int64_t fill) {
  std::vector<int64_t> r = v;
  if (spatial == 1) r.insert(r.begin(), fill);
  return r;
}
std::vector<int64_t> Dims(int64_t a, int64_t b, const std::vector<int64_t>& spatial) {
  std::vector<int64_t> d{a, b};
  d.insert(d.end(), spatial.begin(), spatial.end());
  return d;
}
std::vector<int> Ints(const std::vector<int64_t>& v) { return std::vector<int>(v.begin(), v.end()); }

Status SetFilter(FilterDesc* desc, DataType dtype, bool nhwc, const std::vector<int64_t>& dims) {
  MF_CUDNN_RETURN_IF_ERROR(cudnnCreateFilterDescriptor(desc->out()));
  std::vector<int> d = Ints(dims);
  MF_CUDNN_RETURN_IF_ERROR(cudnnSetFilterNdDescriptor(desc->get(), CudnnType(dtype),
                                                      nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                                                      static_cast<int>(d.size()), d.data()));
  return Status::Ok();
}

Status SetConv(ConvDesc* desc, const ConvParams& p, const std::vector<int64_t>& pads, const std::vector<int64_t>& st,
               const std::vector<int64_t>& dl) {
  MF_CUDNN_RETURN_IF_ERROR(cudnnCreateConvolutionDescriptor(desc->out()));
  std::vector<int> pa = Ints(pads), sa = Ints(st), da = Ints(dl);
  // FP16 data accumulates in float ("pseudo half"): ONNX tolerances need it.
  MF_CUDNN_RETURN_IF_ERROR(cudnnSetConvolutionNdDescriptor(desc->get(), static_cast<int>(pa.size()), pa.data(),
                                                           sa.data(), da.data(), CUDNN_CROSS_CORRELATION,
                                                           CUDNN_DATA_FLOAT));
  MF_CUDNN_RETURN_IF_ERROR(cudnnSetConvolutionGroupCount(desc->get(), static_cast<int>(p.group)));
  return Status::Ok();
}

// Exact FP32 allows only FMA math; TF32 and FP16 modes take what the heuristic ranks first.
bool MathAllowed(Precision precision, cudnnMathType_t math) {
  if (precision == Precision::kTf32 || precision == Precision::kFp16) return true;
  return math == CUDNN_FMA_MATH || math == CUDNN_DEFAULT_MATH;
}
cudnnMathType_t MathFor(Precision precision, cudnnMathType_t ranked) {
  if (precision == Precision::kTf32 || precision == Precision::kFp16) return ranked;
  return CUDNN_FMA_MATH;
}

// A plan for one input shape. Immutable once built, except `fused_failed`, which records that
// cuDNN refused the fused call for this configuration (every later run takes the general path).
struct ForwardPlan {
  Shape out_shape;
  TensorView src_view;        // the input as it arrives
  bool pad_input = false;     // asymmetric pads: cuDNN reads a zero-padded copy
  Shape padded_shape;         // element count of that copy
  TensorView padded_box;      // where the input lands inside the copy
  int64_t padded_offset = 0;  // elements from the copy's start to the box
  TensorView out_view, addend_view;
  bool addend_same_shape = false;
  TensorDesc x, y, bias, z;
  FilterDesc w;
  ConvDesc conv;
  ActivationDesc relu;
  cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  size_t workspace = 0;
  bool fused = false;
  mutable std::atomic<bool> fused_failed{false};
};

struct TransposePlan {
  Shape out_shape;
  Shape full_shape;        // what cuDNN computes (symmetric pads)
  bool crop = false;       // the output is a box of full_shape (and maybe zero past its end)
  bool zero_fill = false;  // part of the output lies outside what cuDNN computes
  TensorView full_box, out_box;
  int64_t full_offset = 0, out_offset = 0;
  TensorView out_view;
  TensorDesc dy, dx, bias, out;
  FilterDesc w;
  ConvDesc conv;
  cudnnConvolutionBwdDataAlgo_t algo = CUDNN_CONVOLUTION_BWD_DATA_ALGO_0;
  size_t workspace = 0;
};

int64_t Offset(const std::vector<int64_t>& starts, const std::vector<int64_t>& strides) {
  int64_t off = 0;
  for (size_t i = 0; i < starts.size(); ++i) off += starts[i] * strides[i];
  return off;
}

char* Advance(void* base, int64_t elements, DataType dtype) {
  return static_cast<char*>(base) + elements * static_cast<int64_t>(ElementSize(dtype));
}

class ConvKernel final : public Kernel {
 public:
  ConvKernel(ConvParams p, Tensor packed_weights, Tensor zero_bias)
      : p_(std::move(p)), packed_weights_(std::move(packed_weights)), zero_bias_(std::move(zero_bias)) {}

  Status Run(const std::vector<const Tensor*>& in, std::vector<Tensor>& out) const override {
    const Tensor& x = *in[0];
    const Tensor& w = *in[1];
    const Tensor* b = in.size() > 2 ? in[2] : nullptr;
    const Tensor* addend = p_.fused_sum && in.size() > 3 ? in[3] : nullptr;
    MF_ASSIGN_OR_RETURN(ConvGeometry geo, ops::ComputeConvGeometry(p_, x.shape(), w.shape()));
    if (b && (b->rank() != 1 || b->dim(0) != geo.m)) {
      return InvalidArgument("bias " + ShapeToString(b->shape()) + " does not match " + std::to_string(geo.m) +
                             " output channels");
    }
    Shape out_shape = ops::ConvOutputShape(geo);
    if (addend) {
      MF_ASSIGN_OR_RETURN(Shape bs, ops::BroadcastShapes(out_shape, addend->shape()));
      if (bs != out_shape) {
        return InvalidArgument("the residual " + ShapeToString(addend->shape()) + " does not broadcast to the output " +
                               ShapeToString(out_shape));
      }
      if (addend->shape() != out_shape && (p_.dst_nhwc || p_.addend_nhwc)) {
        return InvalidArgument("the residual " + ShapeToString(addend->shape()) + " does not match the output " +
                               ShapeToString(out_shape));
      }
    }
    MF_ASSIGN_OR_RETURN(out[0], AllocateDevice(p_.dtype, out_shape));
    if (out[0].num_elements() == 0) return Status::Ok();
    if (x.num_elements() == 0 || w.num_elements() == 0) {
      // No products (C == 0): the output is the bias, residual and activation of zeros.
      MF_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out[0].raw_data(), 0, out[0].byte_size(), Current().stream));
      return Epilogue(geo, b, addend, nullptr, out[0]);
    }
    return p_.transpose ? RunTranspose(geo, x, w, b, out[0]) : RunForward(geo, x, w, b, addend, out[0]);
  }

  bool OwnsCopyOfInput(size_t index) const override { return index == 1 && packed_weights_.num_elements() > 0; }

 private:
  const void* Weights(const Tensor& w) const {
    return packed_weights_.num_elements() ? packed_weights_.raw_data() : w.raw_data();
  }

  // Bias, a residual not already summed, and the activation, on the finished convolution.
  // `plan_y` describes the output for cuDNN's bias add (nullptr: build one here).
  Status Epilogue(const ConvGeometry& geo, const Tensor* b, const Tensor* addend, const TensorDesc* plan_y,
                  Tensor& y) const {
    if (b) {
      TensorDesc y_desc, b_desc;
      std::vector<int64_t> dims = Promote(geo.out, geo.spatial, 1);
      std::vector<int64_t> yd = Dims(geo.n, geo.m, dims);
      if (!plan_y) {
        MF_RETURN_IF_ERROR(SetTensorDesc(&y_desc, p_.dtype, {yd, DenseStrides(yd, p_.dst_nhwc)}));
        plan_y = &y_desc;
      }
      std::vector<int64_t> bd(yd.size(), 1);
      bd[1] = geo.m;
      MF_RETURN_IF_ERROR(SetTensorDesc(&b_desc, p_.dtype, {bd, DenseStrides(bd, false)}));
      const float one = 1.f;
      MF_CUDNN_RETURN_IF_ERROR(
          cudnnAddTensor(Current().cudnn, &one, b_desc.get(), b->raw_data(), &one, plan_y->get(), y.raw_data()));
    }
    if (addend) {
      if (addend->shape() == y.shape()) {
        std::vector<int64_t> d(y.shape().begin(), y.shape().end());
        if (p_.addend_nhwc == p_.dst_nhwc) {
          MF_RETURN_IF_ERROR(BroadcastAxpy(p_.dtype, *addend, 1.f, true, y.shape(), y.raw_data()));
        } else {
          // Same shape, different layouts: add through cuDNN's strided transform (y = a + 1*y).
          TensorDesc a_desc, y_desc;
          MF_RETURN_IF_ERROR(SetTensorDesc(&a_desc, p_.dtype, {d, DenseStrides(d, p_.addend_nhwc)}));
          MF_RETURN_IF_ERROR(SetTensorDesc(&y_desc, p_.dtype, {d, DenseStrides(d, p_.dst_nhwc)}));
          const float one = 1.f;
          MF_CUDNN_RETURN_IF_ERROR(cudnnTransformTensor(Current().cudnn, &one, a_desc.get(), addend->raw_data(), &one,
                                                        y_desc.get(), y.raw_data()));
        }
      } else {
        MF_RETURN_IF_ERROR(BroadcastAxpy(p_.dtype, *addend, 1.f, true, y.shape(), y.raw_data()));
      }
    }
    return ApplyActivation(p_.act, p_.dtype, y.raw_data(), y.num_elements());
  }

  Status RunForward(const ConvGeometry& geo, const Tensor& x, const Tensor& w, const Tensor* b, const Tensor* addend,
                    Tensor& y) const {
    MF_ASSIGN_OR_RETURN(std::shared_ptr<const ForwardPlan> plan, GetForwardPlan(geo, x.shape(), w.shape(), addend));
    const RunContext& ctx = Current();
    MF_ASSIGN_OR_RETURN(Tensor workspace, AllocateWorkspace(plan->workspace));
    const void* src = x.raw_data();
    Tensor padded;
    if (plan->pad_input) {
      MF_ASSIGN_OR_RETURN(padded, AllocateDevice(p_.dtype, plan->padded_shape));
      MF_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(padded.raw_data(), 0, padded.byte_size(), ctx.stream));
      MF_RETURN_IF_ERROR(CopyBox(p_.dtype, plan->src_view, x.raw_data(), plan->padded_box,
                                 Advance(padded.raw_data(), plan->padded_offset, p_.dtype)));
      src = padded.raw_data();
    }
    const float one = 1.f, zero = 0.f;
    bool summed = addend && plan->addend_same_shape && p_.addend_nhwc == p_.dst_nhwc;
    if (plan->fused && !plan->fused_failed.load(std::memory_order_relaxed)) {
      const void* bias = b ? b->raw_data() : zero_bias_.raw_data();
      const void* z = summed ? addend->raw_data() : y.raw_data();
      const float alpha2 = summed ? 1.f : 0.f;
      cudnnStatus_t s = cudnnConvolutionBiasActivationForward(
          ctx.cudnn, &one, plan->x.get(), src, plan->w.get(), Weights(w), plan->conv.get(), plan->algo,
          workspace.raw_data(), plan->workspace, &alpha2, summed ? plan->z.get() : plan->y.get(), z, plan->bias.get(),
          bias, plan->relu.get(), plan->y.get(), y.raw_data());
      if (s == CUDNN_STATUS_SUCCESS) return Status::Ok();
      if (s != CUDNN_STATUS_NOT_SUPPORTED) return CudnnError(s, "cudnnConvolutionBiasActivationForward");
      // This algorithm/layout has no fused kernel: remember it and take the general path.
      plan->fused_failed.store(true, std::memory_order_relaxed);
    }
    // General path: the residual first (as the convolution's beta term), then bias and act.
    if (summed) {
      MF_RETURN_IF_ERROR(CopyBox(p_.dtype, plan->addend_view, addend->raw_data(), plan->out_view, y.raw_data()));
    }
    MF_CUDNN_RETURN_IF_ERROR(cudnnConvolutionForward(
        ctx.cudnn, &one, plan->x.get(), src, plan->w.get(), Weights(w), plan->conv.get(), plan->algo,
        workspace.raw_data(), plan->workspace, summed ? &one : &zero, plan->y.get(), y.raw_data()));
    return Epilogue(geo, b, summed ? nullptr : addend, &plan->y, y);
  }

  Status RunTranspose(const ConvGeometry& geo, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y) const {
    MF_ASSIGN_OR_RETURN(std::shared_ptr<const TransposePlan> plan, GetTransposePlan(geo, x.shape(), w.shape()));
    const RunContext& ctx = Current();
    MF_ASSIGN_OR_RETURN(Tensor workspace, AllocateWorkspace(plan->workspace));
    Tensor full;
    void* dst = y.raw_data();
    if (plan->crop) {
      MF_ASSIGN_OR_RETURN(full, AllocateDevice(p_.dtype, plan->full_shape));
      dst = full.raw_data();
    }
    const float one = 1.f, zero = 0.f;
    MF_CUDNN_RETURN_IF_ERROR(cudnnConvolutionBackwardData(
        ctx.cudnn, &one, plan->w.get(), Weights(w), plan->dy.get(), x.raw_data(), plan->conv.get(), plan->algo,
        workspace.raw_data(), plan->workspace, &zero, plan->dx.get(), dst));
    if (plan->crop) {
      if (plan->zero_fill) MF_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(y.raw_data(), 0, y.byte_size(), ctx.stream));
      MF_RETURN_IF_ERROR(CopyBox(p_.dtype, plan->full_box, Advance(full.raw_data(), plan->full_offset, p_.dtype),
                                 plan->out_box, Advance(y.raw_data(), plan->out_offset, p_.dtype)));
    }
    return Epilogue(geo, b, nullptr, &plan->out, y);
  }

  StatusOr<std::shared_ptr<const ForwardPlan>> GetForwardPlan(const ConvGeometry& geo, const Shape& x_shape,
                                                              const Shape& w_shape, const Tensor* addend) const {
    Shape key = x_shape;
    key.push_back(-1);
    key.insert(key.end(), w_shape.begin(), w_shape.end());
    if (addend) {
      key.push_back(-2);
      key.insert(key.end(), addend->shape().begin(), addend->shape().end());
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = forward_.find(key);
      if (it != forward_.end()) return it->second;
    }
    auto plan = std::make_shared<ForwardPlan>();
    size_t sp = geo.spatial;
    plan->out_shape = ops::ConvOutputShape(geo);
    std::vector<int64_t> in = Promote(geo.in, sp, 1), k = Promote(geo.k, sp, 1), st = Promote(geo.st, sp, 1),
                         dl = Promote(geo.dl, sp, 1), pl = Promote(geo.pl, sp, 0), pr = Promote(geo.pr, sp, 0),
                         outd = Promote(geo.out, sp, 1);
    std::vector<int64_t> pads(pl.size()), padded(in.size()), box_start(in.size() + 2, 0);
    for (size_t i = 0; i < pl.size(); ++i) {
      pads[i] = std::min(pl[i], pr[i]);
      padded[i] = in[i] + (pl[i] - pads[i]) + (pr[i] - pads[i]);
      box_start[2 + i] = pl[i] - pads[i];
      if (padded[i] != in[i]) plan->pad_input = true;
    }
    std::vector<int64_t> xd = Dims(geo.n, geo.c, in), yd = Dims(geo.n, geo.m, outd);
    plan->src_view = {xd, DenseStrides(xd, p_.src_nhwc)};
    plan->out_view = {yd, DenseStrides(yd, p_.dst_nhwc)};
    plan->addend_view = {yd, DenseStrides(yd, p_.addend_nhwc)};
    plan->addend_same_shape = addend && addend->shape() == plan->out_shape;
    TensorView conv_in = plan->src_view;
    if (plan->pad_input) {
      std::vector<int64_t> pd = Dims(geo.n, geo.c, padded);
      conv_in = {pd, DenseStrides(pd, p_.src_nhwc)};
      plan->padded_shape = Shape(pd.begin(), pd.end());
      plan->padded_box = {xd, conv_in.strides};
      plan->padded_offset = Offset(box_start, conv_in.strides);
    }
    MF_RETURN_IF_ERROR(SetTensorDesc(&plan->x, p_.dtype, conv_in));
    MF_RETURN_IF_ERROR(SetTensorDesc(&plan->y, p_.dtype, plan->out_view));
    MF_RETURN_IF_ERROR(SetTensorDesc(&plan->z, p_.dtype, plan->addend_view));
    std::vector<int64_t> bd(yd.size(), 1);
    bd[1] = geo.m;
    MF_RETURN_IF_ERROR(SetTensorDesc(&plan->bias, p_.dtype, {bd, DenseStrides(bd, false)}));
    MF_RETURN_IF_ERROR(SetFilter(&plan->w, p_.dtype, p_.src_nhwc, Dims(w_shape[0], w_shape[1], k)));
    MF_RETURN_IF_ERROR(SetConv(&plan->conv, p_, pads, st, dl));
    std::vector<int> expect(yd.size());
    MF_CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionNdForwardOutputDim(plan->conv.get(), plan->x.get(), plan->w.get(),
                                                                   static_cast<int>(expect.size()), expect.data()));
    for (size_t i = 0; i < yd.size(); ++i) {
      if (expect[i] != yd[i]) return Internal("cuDNN computes a different convolution output shape than ONNX");
    }
    // The fused call: ReLU only (cuDNN's identity variant is restricted to one algorithm), and
    // a bias to pass (the node's, or zeros prepared at bind time).
    plan->fused = IsRelu(p_.act) && (p_.has_bias || zero_bias_.num_elements() == geo.m) &&
                  (!addend || (plan->addend_same_shape && p_.addend_nhwc == p_.dst_nhwc));
    if (plan->fused) {
      MF_CUDNN_RETURN_IF_ERROR(cudnnCreateActivationDescriptor(plan->relu.out()));
      MF_CUDNN_RETURN_IF_ERROR(
          cudnnSetActivationDescriptor(plan->relu.get(), CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
    }
    MF_RETURN_IF_ERROR(ChooseForwardAlgo(plan.get()));
    return Remember(forward_, key, std::move(plan));
  }

  Status ChooseForwardAlgo(ForwardPlan* plan) const {
    MF_CUDNN_RETURN_IF_ERROR(
        cudnnSetConvolutionMathType(plan->conv.get(), MathFor(p_.precision, CUDNN_TENSOR_OP_MATH)));
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int returned = 0;
    MF_CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionForwardAlgorithm_v7(Current().cudnn, plan->x.get(), plan->w.get(),
                                                                    plan->conv.get(), plan->y.get(),
                                                                    CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf));
    for (int i = 0; i < returned; ++i) {
      if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > Current().workspace_bytes ||
          !MathAllowed(p_.precision, perf[i].mathType)) {
        continue;
      }
      plan->algo = perf[i].algo;
      plan->workspace = perf[i].memory;
      MF_CUDNN_RETURN_IF_ERROR(cudnnSetConvolutionMathType(plan->conv.get(), MathFor(p_.precision, perf[i].mathType)));
      return Status::Ok();
    }
    return Unimplemented("cuDNN has no convolution algorithm for this shape within the workspace");
  }

  StatusOr<std::shared_ptr<const TransposePlan>> GetTransposePlan(const ConvGeometry& geo, const Shape& x_shape,
                                                                  const Shape& w_shape) const {
    Shape key = x_shape;
    key.push_back(-1);
    key.insert(key.end(), w_shape.begin(), w_shape.end());
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = transpose_.find(key);
      if (it != transpose_.end()) return it->second;
    }
    auto plan = std::make_shared<TransposePlan>();
    size_t sp = geo.spatial;
    plan->out_shape = ops::ConvOutputShape(geo);
    std::vector<int64_t> in = Promote(geo.in, sp, 1), k = Promote(geo.k, sp, 1), st = Promote(geo.st, sp, 1),
                         dl = Promote(geo.dl, sp, 1), pl = Promote(geo.pl, sp, 0), pr = Promote(geo.pr, sp, 0),
                         op = Promote(geo.op, sp, 0), outd = Promote(geo.out, sp, 1);
    size_t n = in.size();
    // cuDNN computes the transposed convolution with symmetric pads p (the gradient of a forward
    // convolution whose output is the input here): the full size is s*(in-1) + op + ek - 2p, of
    // which the ONNX output is the box starting at pl - p (zeros where it runs past the end).
    std::vector<int64_t> pads(n), full(n), src_start(n + 2, 0), dst_start(n + 2, 0), extent(n);
    for (size_t i = 0; i < n; ++i) {
      if (op[i] >= st[i] && op[i] > 0) return InvalidArgument("output_padding must be smaller than the stride");
      int64_t ek = (k[i] - 1) * dl[i] + 1;
      pads[i] = std::max<int64_t>(0, std::min(pl[i], pr[i]));
      full[i] = st[i] * (in[i] - 1) + op[i] + ek - 2 * pads[i];
      // Output o sits at full-size coordinate o + pl - pads; the copy covers the overlap.
      int64_t begin = std::max<int64_t>(pl[i], pads[i]);
      int64_t end = std::min<int64_t>(pl[i] + outd[i], pads[i] + full[i]);
      if (end <= begin) return InvalidArgument("output_shape leaves no computed output");
      src_start[2 + i] = begin - pads[i];
      dst_start[2 + i] = begin - pl[i];
      extent[i] = end - begin;
      if (full[i] != outd[i] || pl[i] != pads[i]) plan->crop = true;
      if (extent[i] != outd[i]) plan->zero_fill = true;
    }
    std::vector<int64_t> xd = Dims(geo.n, geo.c, in), yd = Dims(geo.n, geo.m, outd), fd = Dims(geo.n, geo.m, full);
    plan->full_shape = Shape(fd.begin(), fd.end());
    plan->out_view = {yd, DenseStrides(yd, false)};
    std::vector<int64_t> fstrides = DenseStrides(fd, false);
    std::vector<int64_t> ed = Dims(geo.n, geo.m, extent);
    plan->full_box = {ed, fstrides};
    plan->out_box = {ed, plan->out_view.strides};
    plan->full_offset = Offset(src_start, fstrides);
    plan->out_offset = Offset(dst_start, plan->out_view.strides);
    MF_RETURN_IF_ERROR(SetTensorDesc(&plan->dy, p_.dtype, {xd, DenseStrides(xd, false)}));
    MF_RETURN_IF_ERROR(SetTensorDesc(&plan->dx, p_.dtype, plan->crop ? TensorView{fd, fstrides} : plan->out_view));
    MF_RETURN_IF_ERROR(SetTensorDesc(&plan->out, p_.dtype, plan->out_view));
    // ONNX ConvTranspose weights [C, M/g, k...] are the forward convolution's [K, C/g, k...].
    MF_RETURN_IF_ERROR(SetFilter(&plan->w, p_.dtype, false, Dims(w_shape[0], w_shape[1], k)));
    MF_RETURN_IF_ERROR(SetConv(&plan->conv, p_, pads, st, dl));
    MF_CUDNN_RETURN_IF_ERROR(
        cudnnSetConvolutionMathType(plan->conv.get(), MathFor(p_.precision, CUDNN_TENSOR_OP_MATH)));
    cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    int returned = 0;
    MF_CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionBackwardDataAlgorithm_v7(
        Current().cudnn, plan->w.get(), plan->dy.get(), plan->conv.get(), plan->dx.get(),
        CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &returned, perf));
    bool found = false;
    for (int i = 0; i < returned && !found; ++i) {
      if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > Current().workspace_bytes ||
          !MathAllowed(p_.precision, perf[i].mathType)) {
        continue;
      }
      plan->algo = perf[i].algo;
      plan->workspace = perf[i].memory;
      MF_CUDNN_RETURN_IF_ERROR(cudnnSetConvolutionMathType(plan->conv.get(), MathFor(p_.precision, perf[i].mathType)));
      found = true;
    }
    if (!found)
      return Unimplemented("cuDNN has no transposed convolution algorithm for this shape within the workspace");
    return Remember(transpose_, key, std::move(plan));
  }

  template <typename Plan>
  std::shared_ptr<const Plan> Remember(std::map<Shape, std::shared_ptr<const Plan>>& cache, const Shape& key,
                                       std::shared_ptr<Plan> plan) const {
    std::lock_guard<std::mutex> lock(mu_);
    // Bounded: a client sending ever-new shapes must not grow memory without limit. Runs still
    // holding an evicted plan keep it alive through their shared_ptr.
    if (cache.size() >= kMaxCachedShapes) cache.clear();
    return cache.emplace(key, std::move(plan)).first->second;
  }

  static constexpr size_t kMaxCachedShapes = 32;
  ConvParams p_;
  Tensor packed_weights_;  // KRSC copy of constant weights for channels-last input (else empty)
  Tensor zero_bias_;       // zeros for the fused call of a Conv without bias (else empty)
  mutable std::mutex mu_;
  mutable std::map<Shape, std::shared_ptr<const ForwardPlan>> forward_;
  mutable std::map<Shape, std::shared_ptr<const TransposePlan>> transpose_;
};

Status RequireDeviceFloat(const KernelInit& init, size_t i, DataType dtype) {
  if (!init.has_input(i)) return init.Error(StatusCode::kInvalidArgument, "input " + std::to_string(i) + " is missing");
  if (init.dtype(i) != dtype || !IsDeviceFloat(dtype)) {
    return init.Error(StatusCode::kUnimplemented, "element type " + std::string(DataTypeName(init.dtype(i))) +
                                                      " of input " + std::to_string(i) + " on the GPU");
  }
  return Status::Ok();
}

// KCRS (ONNX) -> KRSC (cuDNN's NHWC filter format), on the host, as float32.
StatusOr<Tensor> RepackToKrsc(const Tensor& w) {
  const Shape& s = w.shape();
  int64_t k = s[0], c = s[1], hw = s[2] * s[3];
  MF_ASSIGN_OR_RETURN(Tensor out, Tensor::AllocateUninitialized(DataType::kFloat32, s));
  const float* src = w.data<float>();
  float* dst = out.data<float>();
  for (int64_t ki = 0; ki < k; ++ki)
    for (int64_t ci = 0; ci < c; ++ci)
      for (int64_t p = 0; p < hw; ++p) dst[(ki * hw + p) * c + ci] = src[(ki * c + ci) * hw + p];
  return out;
}

StatusOr<BoundKernel> ConvFactory(const KernelInit& init, bool transpose) {
  if (!init.has_input(0)) return init.Error(StatusCode::kInvalidArgument, "input 0 is missing");
  ConvParams p;
  p.dtype = init.dtype(0);
  p.precision = init.precision;
  MF_RETURN_IF_ERROR(RequireDeviceFloat(init, 0, p.dtype));
  MF_RETURN_IF_ERROR(RequireDeviceFloat(init, 1, p.dtype));
  p.has_bias = init.has_input(2);
  if (p.has_bias) MF_RETURN_IF_ERROR(RequireDeviceFloat(init, 2, p.dtype));
  ops::ConvAttributes& attrs = p;
  MF_ASSIGN_OR_RETURN(attrs, ops::ReadConvAttributes(init, transpose));
  MF_ASSIGN_OR_RETURN(p.act, ActivationFromNode(init.node));
  p.fused_sum = init.node.fused_sum;
  p.src_nhwc = init.input_is_nhwc(0);
  p.addend_nhwc = init.input_is_nhwc(3);
  p.dst_nhwc = init.output_nhwc;
  MF_RETURN_IF_ERROR(ops::CheckConvFusedSum(init, transpose));
  if (p.fused_sum) MF_RETURN_IF_ERROR(RequireDeviceFloat(init, 3, p.dtype));
  if (transpose && (p.src_nhwc || p.dst_nhwc)) {
    return init.Error(StatusCode::kUnimplemented, "channels-last ConvTranspose on the GPU");
  }
  const Tensor* w = init.constant_inputs.size() > 1 ? init.constant_inputs[1] : nullptr;
  Tensor packed, zero_bias;
  if (p.src_nhwc) {
    // cuDNN's fast NHWC kernels want the filter in the same layout: repack the constant once.
    if (!w || w->rank() != 4 || w->dtype() != DataType::kFloat32) {
      return init.Error(StatusCode::kUnimplemented, "channels-last Conv needs constant 4-D float weights on the GPU");
    }
    MF_ASSIGN_OR_RETURN(Tensor krsc, RepackToKrsc(*w));
    MF_ASSIGN_OR_RETURN(packed, UploadConstant(krsc, p.dtype));
  }
  if (!transpose && !p.has_bias && IsRelu(p.act) && w && w->rank() >= 1) {
    // The fused cuDNN call always adds a bias: give it zeros.
    MF_ASSIGN_OR_RETURN(Tensor zeros, Tensor::Allocate(DataType::kFloat32, {w->dim(0)}));
    MF_ASSIGN_OR_RETURN(zero_bias, UploadConstant(zeros, p.dtype));
  }
  DataType out_type = p.dtype;
  return BoundKernel{std::make_unique<ConvKernel>(std::move(p), std::move(packed), std::move(zero_bias)), {out_type}};
}

}  // namespace

void RegisterConvKernels(KernelRegistry* registry) {
  registry->Register({"Conv", 1, [](const KernelInit& i) { return ConvFactory(i, false); }, "float, float16"});
  registry->Register({"ConvTranspose", 1, [](const KernelInit& i) { return ConvFactory(i, true); }, "float, float16"});
  RegisterPoolKernels(registry);
}

}  // namespace mf::runtime::cuda
