// LSTM and GRU (ONNX opsets 7 and 14): the attributes a kernel supports, the shapes every input
// must have and the output shapes, shared by any backend's kernel. The activations are the
// defaults only (LSTM Sigmoid/Tanh/Tanh, GRU Sigmoid/Tanh); clip and LSTM's input_forget are
// refused with UNIMPLEMENTED. Both layouts are supported: 0 (X [seq, batch, input]) and 14's
// batch-first 1 (X [batch, seq, input]).
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "runtime/kernel.h"
#include "runtime/tensor.h"

namespace mf::runtime::ops {

enum class RecurrentCell { kLstm, kGru };

// Gates per hidden unit: LSTM i, o, f, c; GRU z, r, h (the order of W's and R's rows).
inline int64_t GateCount(RecurrentCell cell) { return cell == RecurrentCell::kLstm ? 4 : 3; }

// The node's input positions (LSTM's; a GRU has the first six).
enum RecurrentInput : size_t {
  kRecurrentX,
  kRecurrentW,
  kRecurrentR,
  kRecurrentB,
  kRecurrentSequenceLens,
  kRecurrentInitialH,
  kRecurrentInitialC,
  kRecurrentPeepholes,
};

struct RecurrentAttributes {
  RecurrentCell cell = RecurrentCell::kLstm;
  int64_t hidden_size = 0;  // 0 when the attribute is absent: R's last dim
  int64_t num_directions = 1;
  bool reverse = false;              // direction "reverse" (one direction, last step first)
  bool batch_first = false;          // layout 1
  bool linear_before_reset = false;  // GRU
};

// Reads and checks the attributes, the input and output counts and sequence_lens' element type
// (int32); errors carry the node prefix.
StatusOr<RecurrentAttributes> ReadRecurrentAttributes(const KernelInit& init, RecurrentCell cell);

// The sizes the weights fix: W [dirs, gates * hidden, input], R [dirs, gates * hidden, hidden],
// B [dirs, 2 * gates * hidden], P [dirs, 3 * hidden] (b and p may be null).
struct RecurrentWeights {
  int64_t directions = 0, hidden = 0, input_size = 0;
};
StatusOr<RecurrentWeights> CheckRecurrentWeights(const RecurrentAttributes& attrs, const Shape& w, const Shape& r,
                                                 const Shape* b, const Shape* p);

// One run's sizes after checking every input (nullptr for an omitted one) against X and the
// weights, and the output shapes (Y_c has Y_h's).
struct RecurrentPlan {
  int64_t seq_length = 0, batch = 0, input_size = 0, hidden = 0, directions = 0;
  Shape y, y_h;
  // Valid steps per batch entry (sequence_lens, each in [0, seq_length]; seq_length each when it
  // is absent).
  std::vector<int64_t> lengths;
  bool ragged = false;  // some length is short of seq_length
};
StatusOr<RecurrentPlan> PlanRecurrent(const RecurrentAttributes& attrs, const std::vector<const Tensor*>& inputs);

}  // namespace mf::runtime::ops
