#include "runtime/ops/recurrent_rules.h"

#include <algorithm>
#include <cctype>
#include <string>

namespace mf::runtime::ops {
namespace {

const char* CellName(RecurrentCell cell) { return cell == RecurrentCell::kLstm ? "LSTM" : "GRU"; }

bool SameName(const std::string& a, const char* b) {
  std::string lower(a);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  std::string want(b);
  std::transform(want.begin(), want.end(), want.begin(), [](unsigned char c) { return std::tolower(c); });
  return lower == want;
}

// `activations` may only spell out the defaults: one list per direction.
Status CheckDefaultActivations(const KernelInit& init, const RecurrentAttributes& a) {
  std::vector<const char*> defaults = {"Sigmoid", "Tanh"};
  if (a.cell == RecurrentCell::kLstm) defaults.push_back("Tanh");
  std::string default_list;
  for (const char* name : defaults) default_list += std::string(default_list.empty() ? "" : ", ") + name;
  MF_ASSIGN_OR_RETURN(std::vector<std::string> activations, init.attrs().GetStrings("activations", {}));
  if (activations.empty()) return Status::Ok();
  const size_t expected = defaults.size() * static_cast<size_t>(a.num_directions);
  if (activations.size() != expected) {
    return init.Error(StatusCode::kInvalidArgument, "activations has " + std::to_string(activations.size()) +
                                                        " names; " + std::to_string(expected) +
                                                        " expected (one list per direction)");
  }
  for (size_t i = 0; i < activations.size(); ++i) {
    if (!SameName(activations[i], defaults[i % defaults.size()])) {
      return init.Error(StatusCode::kUnimplemented, "activation '" + activations[i] +
                                                        "' is not supported: only the defaults (" + default_list +
                                                        ") are; export the model with the default activations");
    }
  }
  return Status::Ok();
}

Status ShapeError(const char* what, const Shape& got, const Shape& want) {
  return InvalidArgument(std::string(what) + " has shape " + ShapeToString(got) + "; " + ShapeToString(want) +
                         " expected");
}

}  // namespace

StatusOr<RecurrentAttributes> ReadRecurrentAttributes(const KernelInit& init, RecurrentCell cell) {
  RecurrentAttributes a;
  a.cell = cell;
  const Attributes& attrs = init.attrs();
  const size_t max_inputs = cell == RecurrentCell::kLstm ? 8 : 6;
  const size_t max_outputs = cell == RecurrentCell::kLstm ? 3 : 2;
  if (init.num_inputs() > max_inputs || init.node.outputs.size() > max_outputs) {
    return init.Error(StatusCode::kInvalidArgument, std::string(CellName(cell)) + " takes at most " +
                                                        std::to_string(max_inputs) + " inputs and " +
                                                        std::to_string(max_outputs) + " outputs");
  }
  if (init.has_input(kRecurrentSequenceLens) && init.dtype(kRecurrentSequenceLens) != DataType::kInt32) {
    return init.Error(StatusCode::kInvalidArgument, "sequence_lens must be int32, not " +
                                                        std::string(DataTypeName(init.dtype(kRecurrentSequenceLens))));
  }
  MF_ASSIGN_OR_RETURN(a.hidden_size, attrs.GetInt("hidden_size", 0));
  if (a.hidden_size < 0 || (attrs.Has("hidden_size") && a.hidden_size == 0)) {
    return init.Error(StatusCode::kInvalidArgument,
                      "hidden_size must be positive, not " + std::to_string(a.hidden_size));
  }
  MF_ASSIGN_OR_RETURN(std::string direction, attrs.GetString("direction", "forward"));
  if (direction == "bidirectional") {
    a.num_directions = 2;
  } else if (direction == "reverse") {
    a.reverse = true;
  } else if (direction != "forward") {
    return init.Error(StatusCode::kInvalidArgument,
                      "direction '" + direction + "' is not one of forward, reverse, bidirectional");
  }
  MF_ASSIGN_OR_RETURN(int64_t layout, attrs.GetInt("layout", 0));
  if (layout != 0 && init.opset < 14) {
    return init.Error(StatusCode::kInvalidArgument, "the layout attribute needs opset 14 or later");
  }
  if (layout != 0 && layout != 1) {
    return init.Error(StatusCode::kInvalidArgument, "layout must be 0 or 1, not " + std::to_string(layout));
  }
  a.batch_first = layout == 1;
  if (attrs.Has("clip")) {
    return init.Error(StatusCode::kUnimplemented,
                      "the clip attribute (cell clipping) is not supported; export the model without it");
  }
  if (cell == RecurrentCell::kLstm) {
    MF_ASSIGN_OR_RETURN(int64_t input_forget, attrs.GetInt("input_forget", 0));
    if (input_forget != 0) {
      return init.Error(StatusCode::kUnimplemented,
                        "input_forget = 1 (coupled input and forget gates) is not supported");
    }
  } else {
    MF_ASSIGN_OR_RETURN(int64_t lbr, attrs.GetInt("linear_before_reset", 0));
    if (lbr != 0 && lbr != 1) {
      return init.Error(StatusCode::kInvalidArgument, "linear_before_reset must be 0 or 1, not " + std::to_string(lbr));
    }
    a.linear_before_reset = lbr == 1;
  }
  MF_RETURN_IF_ERROR(CheckDefaultActivations(init, a));
  return a;
}

StatusOr<RecurrentWeights> CheckRecurrentWeights(const RecurrentAttributes& a, const Shape& w, const Shape& r,
                                                 const Shape* b, const Shape* p) {
  const int64_t gates = GateCount(a.cell);
  if (w.size() != 3 || r.size() != 3) {
    return InvalidArgument("W and R must be 3-D [num_directions, " + std::to_string(gates) +
                           " * hidden_size, input_size / hidden_size]; got " + ShapeToString(w) + " and " +
                           ShapeToString(r));
  }
  RecurrentWeights out;
  out.directions = a.num_directions;
  out.hidden = a.hidden_size > 0 ? a.hidden_size : r[2];
  out.input_size = w[2];
  if (out.hidden <= 0) return InvalidArgument("hidden_size (R's last dim) must be positive");
  if (out.input_size <= 0) return InvalidArgument("input_size (W's last dim) must be positive");
  const int64_t rows = gates * out.hidden;
  if (w != Shape{out.directions, rows, out.input_size}) {
    return ShapeError("W", w, {out.directions, rows, out.input_size});
  }
  if (r != Shape{out.directions, rows, out.hidden}) return ShapeError("R", r, {out.directions, rows, out.hidden});
  if (b && *b != Shape{out.directions, 2 * rows}) return ShapeError("B", *b, {out.directions, 2 * rows});
  if (p && *p != Shape{out.directions, 3 * out.hidden}) return ShapeError("P", *p, {out.directions, 3 * out.hidden});
  return out;
}

StatusOr<RecurrentPlan> PlanRecurrent(const RecurrentAttributes& a, const std::vector<const Tensor*>& in) {
  auto input = [&](size_t i) -> const Tensor* { return i < in.size() ? in[i] : nullptr; };
  const Tensor* x = input(kRecurrentX);
  const Tensor* w = input(kRecurrentW);
  const Tensor* r = input(kRecurrentR);
  if (!x || !w || !r) return InvalidArgument("X, W and R are required inputs");
  const Tensor* b = input(kRecurrentB);
  const Tensor* p = input(kRecurrentPeepholes);
  MF_ASSIGN_OR_RETURN(
      RecurrentWeights weights,
      CheckRecurrentWeights(a, w->shape(), r->shape(), b ? &b->shape() : nullptr, p ? &p->shape() : nullptr));
  if (x->rank() != 3) {
    return InvalidArgument("X must be 3-D [" + std::string(a.batch_first ? "batch, seq_length" : "seq_length, batch") +
                           ", input_size]; got " + ShapeToString(x->shape()));
  }
  RecurrentPlan plan;
  plan.seq_length = x->dim(a.batch_first ? 1 : 0);
  plan.batch = x->dim(a.batch_first ? 0 : 1);
  plan.input_size = weights.input_size;
  plan.hidden = weights.hidden;
  plan.directions = weights.directions;
  if (x->dim(2) != plan.input_size) {
    return InvalidArgument("X's last dim " + std::to_string(x->dim(2)) + " differs from W's input_size " +
                           std::to_string(plan.input_size));
  }
  const int64_t t = plan.seq_length, n = plan.batch, d = plan.directions, h = plan.hidden;
  plan.y = a.batch_first ? Shape{n, t, d, h} : Shape{t, d, n, h};
  plan.y_h = a.batch_first ? Shape{n, d, h} : Shape{d, n, h};
  const char* const state_names[] = {"initial_h", "initial_c"};
  for (size_t i : {size_t{kRecurrentInitialH}, size_t{kRecurrentInitialC}}) {
    const Tensor* state = input(i);
    if (state && state->shape() != plan.y_h) {
      return ShapeError(state_names[i - kRecurrentInitialH], state->shape(), plan.y_h);
    }
  }
  plan.lengths.assign(static_cast<size_t>(n), t);
  if (const Tensor* lens = input(kRecurrentSequenceLens)) {
    if (lens->dtype() != DataType::kInt32) return InvalidArgument("sequence_lens must be int32");
    if (lens->shape() != Shape{n}) return ShapeError("sequence_lens", lens->shape(), {n});
    for (int64_t i = 0; i < n; ++i) {
      int64_t len = lens->data<int32_t>()[i];
      if (len < 0 || len > t) {
        return InvalidArgument("sequence_lens[" + std::to_string(i) + "] = " + std::to_string(len) +
                               " is outside [0, seq_length = " + std::to_string(t) + "]");
      }
      plan.lengths[static_cast<size_t>(i)] = len;
      plan.ragged |= len < t;
    }
  }
  return plan;
}

}  // namespace mf::runtime::ops
