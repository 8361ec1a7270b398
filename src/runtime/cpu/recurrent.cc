// LSTM and GRU on the CPU. Per direction, one GEMM projects every time step's input at once
// (X·W^T, plus the biases that are plain sums); each step then multiplies the hidden state by R
// (H·R^T: one GEMM, two for a GRU with linear_before_reset = 0, whose reset gate scales H before
// R) and applies the gates row by row. A batch entry past its sequence_lens keeps its state and
// writes zeros to Y, so Y_h/Y_c hold its last valid step (zeros for an empty sequence); a reverse
// direction runs each entry from its own last valid step back to step 0, as ONNX Runtime does.
#include <algorithm>
#include <cmath>
#include <utility>

#include "runtime/cpu/cpu_common.h"
#include "runtime/ops/recurrent_rules.h"

namespace mf::runtime::cpu {
namespace {

using ops::RecurrentCell;

float Sigmoid(float x) { return 1.f / (1.f + std::exp(-x)); }

// Row offsets of X (and of the projected input) and of Y, Y_h and the initial states, for the
// sequence-first (0) and batch-first (1) layouts.
struct RecurrentLayout {
  int64_t seq_length, batch, directions;
  bool batch_first;
  int64_t InputRow(int64_t t, int64_t b) const { return batch_first ? b * seq_length + t : t * batch + b; }
  int64_t OutputRow(int64_t t, int64_t d, int64_t b) const {
    return batch_first ? (b * seq_length + t) * directions + d : (t * directions + d) * batch + b;
  }
  int64_t StateRow(int64_t d, int64_t b) const { return batch_first ? b * directions + d : d * batch + b; }
};

// The buffers one direction's steps read and write.
struct DirectionBuffers {
  float* projected;     // [seq * batch, gates * hidden]: X·W^T + additive biases, InputRow order
  float* hidden;        // [batch, hidden]
  float* cell;          // [batch, hidden] (LSTM)
  float* recurrent;     // [batch, gates * hidden]: H·R^T of the step
  float* reset_scaled;  // [batch, hidden]: r ⊙ H (GRU, linear_before_reset = 0)
  float* update_gate;   // [batch, hidden]: z (GRU, linear_before_reset = 0)
};

class RecurrentKernel final : public Kernel {
 public:
  RecurrentKernel(ops::RecurrentAttributes attrs, std::vector<bool> outputs_present)
      : attrs_(attrs), present_(std::move(outputs_present)) {}

  Status Run(const std::vector<const Tensor*>& in, std::vector<Tensor>& out) const override {
    MF_ASSIGN_OR_RETURN(ops::RecurrentPlan plan, ops::PlanRecurrent(attrs_, in));
    const int64_t seq = plan.seq_length, batch = plan.batch, hidden = plan.hidden;
    const int64_t rows = ops::GateCount(attrs_.cell) * hidden;
    const bool lstm = attrs_.cell == RecurrentCell::kLstm;
    Tensor* y = Present(0) ? &out[0] : nullptr;
    Tensor* y_h = Present(1) ? &out[1] : nullptr;
    Tensor* y_c = lstm && Present(2) ? &out[2] : nullptr;
    if (y) {
      // Steps past a short sequence stay zero.
      MF_ASSIGN_OR_RETURN(*y, plan.ragged ? Tensor::Allocate(DataType::kFloat32, plan.y)
                                          : Tensor::AllocateUninitialized(DataType::kFloat32, plan.y));
    }
    for (Tensor* state : {y_h, y_c}) {
      if (state) {
        MF_ASSIGN_OR_RETURN(*state, Tensor::AllocateUninitialized(DataType::kFloat32, plan.y_h));
      }
    }
    MF_ASSIGN_OR_RETURN(Tensor projected, Tensor::AllocateUninitialized(DataType::kFloat32, {seq * batch, rows}));
    // Zeroed: a GRU's second product also reads the rows of entries past their length.
    MF_ASSIGN_OR_RETURN(Tensor scratch, Tensor::Allocate(DataType::kFloat32, {batch, rows + 4 * hidden}));
    float* s = scratch.data<float>();
    DirectionBuffers buffers{.projected = projected.data<float>(),
                             .hidden = s,
                             .cell = s + batch * hidden,
                             .recurrent = s + 2 * batch * hidden,
                             .reset_scaled = s + 2 * batch * hidden + batch * rows,
                             .update_gate = s + 3 * batch * hidden + batch * rows};
    const RecurrentLayout layout{seq, batch, plan.directions, attrs_.batch_first};
    for (int64_t d = 0; d < plan.directions; ++d) {
      MF_RETURN_IF_ERROR(RunDirection(in, plan, layout, d, buffers, y));
      for (int64_t b = 0; b < batch; ++b) {
        const int64_t row = layout.StateRow(d, b) * hidden;
        // An empty sequence's final states are zero, not its initial ones (as in ONNX Runtime).
        const bool empty = plan.lengths[static_cast<size_t>(b)] == 0;
        for (auto [state, source] : {std::pair{y_h, buffers.hidden}, std::pair{y_c, buffers.cell}}) {
          if (!state) continue;
          float* dst = state->data<float>() + row;
          if (empty) {
            std::fill_n(dst, hidden, 0.f);
          } else {
            std::copy_n(source + b * hidden, hidden, dst);
          }
        }
      }
    }
    return Status::Ok();
  }

 private:
  bool Present(size_t i) const { return i < present_.size() && present_[i]; }

  static const float* Input(const std::vector<const Tensor*>& in, size_t i) {
    return i < in.size() && in[i] ? in[i]->data<float>() : nullptr;
  }

  Status RunDirection(const std::vector<const Tensor*>& in, const ops::RecurrentPlan& plan,
                      const RecurrentLayout& layout, int64_t d, const DirectionBuffers& buf, Tensor* y) const {
    const int64_t seq = plan.seq_length, batch = plan.batch, hidden = plan.hidden, input = plan.input_size;
    const int64_t rows = ops::GateCount(attrs_.cell) * hidden;
    const bool lstm = attrs_.cell == RecurrentCell::kLstm;
    const bool lbr = attrs_.linear_before_reset;
    const float* w = in[ops::kRecurrentW]->data<float>() + d * rows * input;
    const float* r = in[ops::kRecurrentR]->data<float>() + d * rows * hidden;
    const float* bias = Input(in, ops::kRecurrentB);
    const float* w_bias = bias ? bias + d * 2 * rows : nullptr;
    const float* r_bias = bias ? w_bias + rows : nullptr;
    const float* peep = Input(in, ops::kRecurrentPeepholes);
    if (peep) peep += d * 3 * hidden;

    // The projected input, with Wb + Rb folded in; a GRU's Rbh is added inside the reset gate's
    // product when linear_before_reset = 1.
    MF_RETURN_IF_ERROR(Sgemm(false, true, seq * batch, rows, input, 1.f, in[ops::kRecurrentX]->data<float>(), input, w,
                             input, 0.f, buf.projected, rows));
    if (bias) {
      std::vector<float> sum(static_cast<size_t>(rows));
      const int64_t recurrent_additive = !lstm && lbr ? 2 * hidden : rows;
      for (int64_t j = 0; j < rows; ++j)
        sum[static_cast<size_t>(j)] = w_bias[j] + (j < recurrent_additive ? r_bias[j] : 0.f);
      ParallelFor(seq * batch, std::max<int64_t>(1, 16384 / rows), [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          float* row = buf.projected + i * rows;
          for (int64_t j = 0; j < rows; ++j) row[j] += sum[static_cast<size_t>(j)];
        }
      });
    }
    const float* hr_bias = !lstm && lbr && r_bias ? r_bias + 2 * hidden : nullptr;

    for (int64_t b = 0; b < batch; ++b) {
      const int64_t state = layout.StateRow(d, b) * hidden;
      const float* h0 = Input(in, ops::kRecurrentInitialH);
      const float* c0 = Input(in, ops::kRecurrentInitialC);
      float* h = buf.hidden + b * hidden;
      float* c = buf.cell + b * hidden;
      // Absent initial states are zero (the buffers still hold the previous direction's).
      std::fill_n(h, hidden, 0.f);
      std::fill_n(c, hidden, 0.f);
      if (h0) std::copy_n(h0 + state, hidden, h);
      if (c0) std::copy_n(c0 + state, hidden, c);
    }

    const bool reverse = attrs_.reverse || d == 1;
    const int64_t grain = std::max<int64_t>(1, 4096 / rows);
    for (int64_t step = 0; step < seq; ++step) {
      // A GRU without linear_before_reset multiplies only z and r's rows of R by H here.
      const int64_t product_rows = !lstm && !lbr ? 2 * hidden : rows;
      MF_RETURN_IF_ERROR(Sgemm(false, true, batch, product_rows, hidden, 1.f, buf.hidden, hidden, r, hidden, 0.f,
                               buf.recurrent, rows));
      auto time_of = [&](int64_t b) {
        const int64_t len = plan.lengths[static_cast<size_t>(b)];
        return reverse ? len - 1 - step : step;
      };
      auto active = [&](int64_t b) { return step < plan.lengths[static_cast<size_t>(b)]; };
      if (!lstm && !lbr) {
        ParallelFor(batch, grain, [&](int64_t begin, int64_t end) {
          for (int64_t b = begin; b < end; ++b) {
            if (!active(b)) continue;
            GruResetAndUpdate(buf.projected + layout.InputRow(time_of(b), b) * rows, buf.recurrent + b * rows,
                              buf.hidden + b * hidden, hidden, buf.reset_scaled + b * hidden,
                              buf.update_gate + b * hidden);
          }
        });
        MF_RETURN_IF_ERROR(Sgemm(false, true, batch, hidden, hidden, 1.f, buf.reset_scaled, hidden,
                                 r + 2 * hidden * hidden, hidden, 0.f, buf.recurrent + 2 * hidden, rows));
      }
      ParallelFor(batch, grain, [&](int64_t begin, int64_t end) {
        for (int64_t b = begin; b < end; ++b) {
          if (!active(b)) continue;
          const int64_t t = time_of(b);
          const float* x_part = buf.projected + layout.InputRow(t, b) * rows;
          const float* h_part = buf.recurrent + b * rows;
          float* h = buf.hidden + b * hidden;
          if (lstm) {
            LstmStep(x_part, h_part, peep, hidden, h, buf.cell + b * hidden);
          } else if (lbr) {
            GruStepLinearBeforeReset(x_part, h_part, hr_bias, hidden, h);
          } else {
            GruStepAfterReset(x_part, h_part, buf.update_gate + b * hidden, hidden, h);
          }
          if (y) std::copy_n(h, hidden, y->data<float>() + layout.OutputRow(t, d, b) * hidden);
        }
      });
    }
    return Status::Ok();
  }

  // Gates i, o, f, c; peepholes (i, o, f) scale the previous cell for i and f, the new one for o.
  static void LstmStep(const float* x, const float* hr, const float* peep, int64_t n, float* h, float* c) {
    for (int64_t j = 0; j < n; ++j) {
      const float c_prev = c[j];
      float gi = x[j] + hr[j], go = x[n + j] + hr[n + j], gf = x[2 * n + j] + hr[2 * n + j];
      if (peep) {
        gi += peep[j] * c_prev;
        gf += peep[2 * n + j] * c_prev;
      }
      const float c_new = Sigmoid(gf) * c_prev + Sigmoid(gi) * std::tanh(x[3 * n + j] + hr[3 * n + j]);
      if (peep) go += peep[n + j] * c_new;
      c[j] = c_new;
      h[j] = Sigmoid(go) * std::tanh(c_new);
    }
  }

  // h~ = tanh(Xh + r ⊙ (H·Rh^T + Rbh)); H = (1 - z) ⊙ h~ + z ⊙ H.
  static void GruStepLinearBeforeReset(const float* x, const float* hr, const float* hr_bias, int64_t n, float* h) {
    for (int64_t j = 0; j < n; ++j) {
      const float z = Sigmoid(x[j] + hr[j]);
      const float reset = Sigmoid(x[n + j] + hr[n + j]);
      const float candidate = std::tanh(x[2 * n + j] + reset * (hr[2 * n + j] + (hr_bias ? hr_bias[j] : 0.f)));
      h[j] = (1.f - z) * candidate + z * h[j];
    }
  }

  // linear_before_reset = 0, first half: z, and r ⊙ H for the second product.
  static void GruResetAndUpdate(const float* x, const float* hr, const float* h, int64_t n, float* reset_scaled,
                                float* z) {
    for (int64_t j = 0; j < n; ++j) {
      z[j] = Sigmoid(x[j] + hr[j]);
      reset_scaled[j] = Sigmoid(x[n + j] + hr[n + j]) * h[j];
    }
  }

  // Second half: h~ = tanh(Xh + (r ⊙ H)·Rh^T + Rbh + Wbh) (the biases are in x).
  static void GruStepAfterReset(const float* x, const float* hr, const float* z, int64_t n, float* h) {
    for (int64_t j = 0; j < n; ++j) {
      const float candidate = std::tanh(x[2 * n + j] + hr[2 * n + j]);
      h[j] = (1.f - z[j]) * candidate + z[j] * h[j];
    }
  }

  ops::RecurrentAttributes attrs_;
  std::vector<bool> present_;  // per node output
};

StatusOr<BoundKernel> RecurrentFactory(const KernelInit& init, RecurrentCell cell) {
  MF_ASSIGN_OR_RETURN(ops::RecurrentAttributes attrs, ops::ReadRecurrentAttributes(init, cell));
  for (size_t i : {ops::kRecurrentX, ops::kRecurrentW, ops::kRecurrentR}) MF_RETURN_IF_ERROR(RequireFloat(init, i));
  for (size_t i : {ops::kRecurrentB, ops::kRecurrentInitialH, ops::kRecurrentInitialC, ops::kRecurrentPeepholes}) {
    if (init.has_input(i)) MF_RETURN_IF_ERROR(RequireFloat(init, i));
  }
  // Constant weights (the usual case) are checked now, so a bad model fails to load.
  auto constant_shape = [&](size_t i) -> const Shape* {
    return i < init.constant_inputs.size() && init.constant_inputs[i] ? &init.constant_inputs[i]->shape() : nullptr;
  };
  const Shape* w = constant_shape(ops::kRecurrentW);
  const Shape* r = constant_shape(ops::kRecurrentR);
  const bool b_known = !init.has_input(ops::kRecurrentB) || constant_shape(ops::kRecurrentB);
  const bool p_known = !init.has_input(ops::kRecurrentPeepholes) || constant_shape(ops::kRecurrentPeepholes);
  if (w && r && b_known && p_known) {
    auto checked = ops::CheckRecurrentWeights(attrs, *w, *r, constant_shape(ops::kRecurrentB),
                                              constant_shape(ops::kRecurrentPeepholes));
    if (!checked.ok()) return init.Error(StatusCode::kInvalidArgument, checked.status().message());
  }
  std::vector<bool> present;
  for (int v : init.node.outputs) present.push_back(v != kNoValue);
  std::vector<DataType> outs(init.node.outputs.size(), DataType::kFloat32);
  return BoundKernel{std::make_unique<RecurrentKernel>(attrs, std::move(present)), std::move(outs)};
}

}  // namespace

void RegisterRecurrentKernels(KernelRegistry* r) {
  r->Register({"LSTM", 7, [](const KernelInit& i) { return RecurrentFactory(i, RecurrentCell::kLstm); }, "float"});
  r->Register({"GRU", 7, [](const KernelInit& i) { return RecurrentFactory(i, RecurrentCell::kGru); }, "float"});
}

}  // namespace mf::runtime::cpu
