#include <cmath>
#include <cstring>

#include "runtime/graph/bind.h"
#include "runtime/passes/passes.h"

namespace mf::runtime {
namespace {

// The node index that reads value `v`, when exactly one node does and `v` is no graph output.
std::vector<int> SoleConsumers(const Graph& g) {
  std::vector<int> consumer(g.values.size(), -1);
  std::vector<int> uses = CountUses(g);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (int in : g.nodes[i].inputs) {
      if (in != kNoValue && uses[static_cast<size_t>(in)] == 1) consumer[static_cast<size_t>(in)] = static_cast<int>(i);
    }
  }
  return consumer;
}

const Tensor* ConstFloat(const Graph& g, const Node& n, size_t i) {
  if (i >= n.inputs.size() || n.inputs[i] == kNoValue) return nullptr;
  const Tensor* t = g.values[static_cast<size_t>(n.inputs[i])].constant.get();
  return t && t->dtype() == DataType::kFloat32 ? t : nullptr;
}

// Keeps the nodes not marked `removed`, in order.
void DropRemoved(Graph* g, const std::vector<bool>& removed) {
  std::vector<Node> kept;
  for (size_t i = 0; i < g->nodes.size(); ++i) {
    if (!removed[i]) kept.push_back(std::move(g->nodes[i]));
  }
  g->nodes = std::move(kept);
}

int AddConstant(Graph* g, const std::string& name, Tensor t) {
  Value v;
  v.name = name;
  v.dtype = t.dtype();
  v.dtype_known = true;
  v.shape = t.shape();
  v.constant = std::make_shared<const Tensor>(std::move(t));
  return g->AddValue(std::move(v));
}

// Rewrites conv (W, B) so that it computes BN(conv(x)) for inference-mode `bn`; false when the
// shapes do not allow it (the graph is then left as it was).
bool FoldBatchNormInto(Graph* g, Node& conv, const Node& bn) {
  const Tensor* w = ConstFloat(*g, conv, 1);
  const Tensor* b = conv.inputs.size() > 2 ? ConstFloat(*g, conv, 2) : nullptr;
  if (!w || w->rank() < 3 || (conv.inputs.size() > 2 && conv.inputs[2] != kNoValue && !b)) return false;
  const Tensor* p[4];
  for (size_t i = 0; i < 4; ++i) {
    p[i] = ConstFloat(*g, bn, i + 1);
    if (!p[i] || p[i]->num_elements() != w->dim(0)) return false;
  }
  if (b && b->num_elements() != w->dim(0)) return false;
  auto eps = bn.attributes.GetFloat("epsilon", 1e-5f);
  auto training = bn.attributes.GetInt("training_mode", 0);
  auto spatial = bn.attributes.GetInt("spatial", 1);
  if (!eps.ok() || !training.ok() || *training != 0 || !spatial.ok() || *spatial != 1) return false;
  for (size_t i = 1; i < bn.outputs.size(); ++i) {
    if (bn.outputs[i] != kNoValue) return false;
  }
  int64_t m = w->dim(0), per = w->num_elements() / std::max<int64_t>(m, 1);
  auto nw = Tensor::AllocateUninitialized(DataType::kFloat32, w->shape());
  auto nb = Tensor::AllocateUninitialized(DataType::kFloat32, {m});
  if (!nw.ok() || !nb.ok()) return false;
  for (int64_t o = 0; o < m; ++o) {
    float s = p[0]->data<float>()[o] / std::sqrt(p[3]->data<float>()[o] + *eps);
    for (int64_t i = 0; i < per; ++i) nw->data<float>()[o * per + i] = w->data<float>()[o * per + i] * s;
    float bias = b ? b->data<float>()[o] : 0.f;
    nb->data<float>()[o] = (bias - p[2]->data<float>()[o]) * s + p[1]->data<float>()[o];
  }
  int wi = AddConstant(g, conv.name + "/folded_bn_weights", std::move(nw).value());
  int bi = AddConstant(g, conv.name + "/folded_bn_bias", std::move(nb).value());
  conv.inputs.resize(3, kNoValue);
  conv.inputs[1] = wi;
  conv.inputs[2] = bi;
  conv.outputs = {bn.outputs[0]};
  return true;
}

}  // namespace

void FuseConvBatchNorm(Graph* g) {
  std::vector<int> consumer = SoleConsumers(*g);
  std::vector<bool> removed(g->nodes.size(), false);
  for (size_t i = 0; i < g->nodes.size(); ++i) {
    Node& conv = g->nodes[i];
    if (conv.op_type != "Conv" || conv.outputs.size() != 1 || !conv.fused_activation.empty()) continue;
    int c = consumer[static_cast<size_t>(conv.outputs[0])];
    if (c < 0 || g->nodes[static_cast<size_t>(c)].op_type != "BatchNormalization") continue;
    const Node& bn = g->nodes[static_cast<size_t>(c)];
    if (bn.inputs.empty() || bn.inputs[0] != conv.outputs[0]) continue;
    if (FoldBatchNormInto(g, conv, bn)) removed[static_cast<size_t>(c)] = true;
  }
  DropRemoved(g, removed);
}

void FuseActivations(Graph* g, bool gelu) {
  std::vector<int> consumer = SoleConsumers(*g);
  std::vector<bool> removed(g->nodes.size(), false);
  for (size_t i = 0; i < g->nodes.size(); ++i) {
    Node& prod = g->nodes[i];
    if ((prod.op_type != "Conv" && prod.op_type != "Gemm" && prod.op_type != "MatMul") || prod.outputs.size() != 1 ||
        !prod.fused_activation.empty()) {
      continue;
    }
    if (g->values[static_cast<size_t>(prod.outputs[0])].dtype != DataType::kFloat32) continue;
    int c = consumer[static_cast<size_t>(prod.outputs[0])];
    if (c < 0) continue;
    const Node& act = g->nodes[static_cast<size_t>(c)];
    if (act.inputs.empty() || act.inputs[0] != prod.outputs[0]) continue;
    float alpha = 0.f, beta = 0.f;
    if (act.op_type == "LeakyRelu") {
      auto a = act.attributes.GetFloat("alpha", 0.01f);
      if (!a.ok()) continue;
      alpha = *a;
    } else if (act.op_type == "Clip") {
      alpha = -INFINITY;
      beta = INFINITY;
      if (g->opset < 11) {
        auto lo = act.attributes.GetFloat("min", alpha), hi = act.attributes.GetFloat("max", beta);
        if (!lo.ok() || !hi.ok()) continue;
        alpha = *lo;
        beta = *hi;
      } else {
        bool ok = true;
        for (size_t k = 1; k < act.inputs.size() && k < 3; ++k) {
          if (act.inputs[k] == kNoValue) continue;
          const Tensor* t = ConstFloat(*g, act, k);
          if (!t || t->num_elements() != 1) {
            ok = false;
            break;
          }
          (k == 1 ? alpha : beta) = t->data<float>()[0];
        }
        if (!ok) continue;
      }
    } else if (act.op_type == "Gelu") {
      if (!gelu || prod.op_type == "Conv") continue;
      auto approximate = act.attributes.GetString("approximate", "none");
      if (!approximate.ok() || *approximate != "none") continue;
    } else if (act.op_type != "Relu" && act.op_type != "Sigmoid" && act.op_type != "Tanh") {
      continue;
    }
    prod.fused_activation = act.op_type;
    prod.fused_alpha = alpha;
    prod.fused_beta = beta;
    prod.outputs = {act.outputs[0]};
    removed[static_cast<size_t>(c)] = true;
  }
  DropRemoved(g, removed);
}

void FuseConvAdd(Graph* g) {
  std::vector<int> consumer = SoleConsumers(*g);
  std::vector<int> producer(g->values.size(), -1);
  for (size_t i = 0; i < g->nodes.size(); ++i) {
    for (int o : g->nodes[i].outputs) {
      if (o != kNoValue) producer[static_cast<size_t>(o)] = static_cast<int>(i);
    }
  }
  std::vector<bool> removed(g->nodes.size(), false);
  for (size_t i = 0; i < g->nodes.size(); ++i) {
    Node& conv = g->nodes[i];
    if (conv.op_type != "Conv" || conv.outputs.size() != 1 || conv.fused_sum || !conv.fused_activation.empty())
      continue;
    int c = consumer[static_cast<size_t>(conv.outputs[0])];
    if (c < 0 || removed[static_cast<size_t>(c)]) continue;
    const Node& add = g->nodes[static_cast<size_t>(c)];
    if (add.op_type != "Add" || add.inputs.size() != 2 || add.inputs[0] == add.inputs[1]) continue;
    int other = add.inputs[0] == conv.outputs[0] ? add.inputs[1] : add.inputs[0];
    const Value& ov = g->values[static_cast<size_t>(other)];
    // Constant addends are biases (broadcast); the residual must exist before the Conv runs.
    if (ov.constant || ov.dtype != DataType::kFloat32 || producer[static_cast<size_t>(other)] >= static_cast<int>(i))
      continue;
    conv.inputs.resize(3, kNoValue);
    conv.inputs.push_back(other);
    conv.fused_sum = true;
    conv.outputs = {add.outputs[0]};
    removed[static_cast<size_t>(c)] = true;
  }
  DropRemoved(g, removed);
}

namespace {

// Node index that writes each value (-1 for inputs and constants).
std::vector<int> Producers(const Graph& g) {
  std::vector<int> producer(g.values.size(), -1);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (int o : g.nodes[i].outputs) {
      if (o != kNoValue) producer[static_cast<size_t>(o)] = static_cast<int>(i);
    }
  }
  return producer;
}

// True when value `v` is a float32 constant holding one number within `tolerance` of `want`.
bool IsConstNear(const Graph& g, int v, float want, float tolerance) {
  if (v == kNoValue) return false;
  const Tensor* t = g.values[static_cast<size_t>(v)].constant.get();
  return t && t->dtype() == DataType::kFloat32 && t->num_elements() == 1 &&
         std::fabs(t->data<float>()[0] - want) <= tolerance;
}

// For a two-input node reading `v`, its other input; kNoValue otherwise.
int OtherInput(const Node& n, int v) {
  if (n.inputs.size() != 2 || n.outputs.size() != 1) return kNoValue;
  if (n.inputs[0] == v) return n.inputs[1];
  if (n.inputs[1] == v) return n.inputs[0];
  return kNoValue;
}

}  // namespace

void FuseMatMulBias(Graph* g) {
  std::vector<int> consumer = SoleConsumers(*g);
  std::vector<bool> removed(g->nodes.size(), false);
  for (size_t i = 0; i < g->nodes.size(); ++i) {
    Node& mm = g->nodes[i];
    if (mm.op_type != "MatMul" || mm.inputs.size() != 2 || mm.outputs.size() != 1 || !mm.fused_activation.empty())
      continue;
    const Tensor* w = ConstFloat(*g, mm, 1);
    if (!w || w->rank() != 2) continue;
    int c = consumer[static_cast<size_t>(mm.outputs[0])];
    if (c < 0 || removed[static_cast<size_t>(c)]) continue;
    const Node& add = g->nodes[static_cast<size_t>(c)];
    if (add.op_type != "Add") continue;
    const int bias = OtherInput(add, mm.outputs[0]);
    if (bias == kNoValue || bias == mm.outputs[0]) continue;
    // Only a bias of rank 1: one of higher rank could widen the Add's output beyond the product's.
    const Tensor* b = g->values[static_cast<size_t>(bias)].constant.get();
    if (!b || b->dtype() != DataType::kFloat32 || b->rank() != 1 || b->dim(0) != w->dim(1)) continue;
    mm.inputs.push_back(bias);
    mm.outputs = {add.outputs[0]};
    removed[static_cast<size_t>(c)] = true;
  }
  DropRemoved(g, removed);
}

void FuseGelu(Graph* g) {
  std::vector<int> consumer = SoleConsumers(*g);
  std::vector<int> producer = Producers(*g);
  std::vector<bool> removed(g->nodes.size(), false);
  auto sole = [&](int value) -> Node* {
    int c = value == kNoValue ? -1 : consumer[static_cast<size_t>(value)];
    return c < 0 || removed[static_cast<size_t>(c)] ? nullptr : &g->nodes[static_cast<size_t>(c)];
  };
  constexpr float kTolerance = 1e-5f;
  for (size_t i = 0; i < g->nodes.size(); ++i) {
    Node& erf = g->nodes[i];
    if (erf.op_type != "Erf" || erf.inputs.size() != 1 || erf.outputs.size() != 1 || removed[i]) continue;
    const int scaled = erf.inputs[0];
    const int s = producer[static_cast<size_t>(scaled)];
    if (s < 0 || consumer[static_cast<size_t>(scaled)] != static_cast<int>(i)) continue;
    const Node& scale = g->nodes[static_cast<size_t>(s)];
    int x = kNoValue;
    if (scale.op_type == "Div" && scale.inputs.size() == 2 &&
        IsConstNear(*g, scale.inputs[1], 1.41421356f, kTolerance)) {
      x = scale.inputs[0];
    } else if (scale.op_type == "Mul" && scale.inputs.size() == 2) {
      for (int k : {0, 1}) {
        if (IsConstNear(*g, scale.inputs[static_cast<size_t>(k)], 0.70710678f, kTolerance)) x = scale.inputs[1 - k];
      }
    }
    if (x == kNoValue || g->values[static_cast<size_t>(x)].dtype != DataType::kFloat32) continue;
    Node* add = sole(erf.outputs[0]);
    if (!add || add->op_type != "Add" || !IsConstNear(*g, OtherInput(*add, erf.outputs[0]), 1.f, kTolerance)) continue;
    Node* times_x = sole(add->outputs[0]);
    if (!times_x || times_x->op_type != "Mul" || OtherInput(*times_x, add->outputs[0]) != x) continue;
    Node* half = sole(times_x->outputs[0]);
    if (!half || half->op_type != "Mul" || !IsConstNear(*g, OtherInput(*half, times_x->outputs[0]), 0.5f, kTolerance))
      continue;
    const int y = half->outputs[0];
    for (const Node* n : {add, times_x, half}) removed[static_cast<size_t>(n - g->nodes.data())] = true;
    removed[static_cast<size_t>(s)] = true;
    erf.op_type = "Gelu";
    erf.inputs = {x};
    erf.outputs = {y};
  }
  DropRemoved(g, removed);
}

namespace {

// The `perm` attribute of a Transpose node when it is a permutation of rank 2 or more (ONNX's
// default, reversing the dims, needs the rank, which a pass may not know: empty then).
std::vector<int64_t> TransposePerm(const Node& t) {
  StatusOr<std::vector<int64_t>> perm = t.attributes.GetInts("perm", {});
  if (!perm.ok() || perm->size() < 2) return {};
  std::vector<bool> seen(perm->size(), false);
  for (int64_t p : *perm) {
    if (p < 0 || p >= static_cast<int64_t>(perm->size()) || seen[static_cast<size_t>(p)]) return {};
    seen[static_cast<size_t>(p)] = true;
  }
  return *perm;
}

// Whether a MatMul operand permuted by `perm` is still a matrix with a unit stride on one side
// (its last or second-last dim is the source's innermost), which a strided sgemm reads as is.
bool SgemmReadable(const std::vector<int64_t>& perm) {
  const int64_t last = static_cast<int64_t>(perm.size()) - 1;
  return perm[perm.size() - 1] == last || perm[perm.size() - 2] == last;
}

}  // namespace

void FuseMatMulTransposes(Graph* g) {
  std::vector<int> consumer = SoleConsumers(*g);
  std::vector<int> producer = Producers(*g);
  std::vector<bool> removed(g->nodes.size(), false);
  // The node that alone reads `value` and writes it from one op of `op_type`, if any.
  auto sole_producer = [&](int value, const char* op_type, size_t reader) -> Node* {
    if (value == kNoValue || consumer[static_cast<size_t>(value)] != static_cast<int>(reader)) return nullptr;
    const int p = producer[static_cast<size_t>(value)];
    if (p < 0 || removed[static_cast<size_t>(p)] || g->nodes[static_cast<size_t>(p)].op_type != op_type) return nullptr;
    return &g->nodes[static_cast<size_t>(p)];
  };
  for (size_t i = 0; i < g->nodes.size(); ++i) {
    Node& mm = g->nodes[i];
    if (mm.op_type != "MatMul" || mm.inputs.size() != 2 || mm.outputs.size() != 1 || !mm.matmul_layout.plain())
      continue;
    if (g->values[static_cast<size_t>(mm.inputs[1])].constant) continue;  // weights: the packed kernel's
    Node::MatMulLayout layout;
    for (size_t k : {size_t{0}, size_t{1}}) {
      // A scalar Div or Mul on the operand becomes the product's scale.
      for (const char* op : {"Div", "Mul"}) {
        Node* scaling = sole_producer(mm.inputs[k], op, i);
        if (!scaling || scaling->inputs.size() != 2) continue;
        for (size_t c : {size_t{1}, size_t{0}}) {
          const Tensor* f = ConstFloat(*g, *scaling, c);
          if (!f || f->num_elements() != 1 || (c == 0 && scaling->op_type == "Div")) continue;
          const float factor = f->data<float>()[0];
          if (!std::isfinite(factor) || factor == 0.f) continue;
          layout.scale *= scaling->op_type == "Div" ? 1.f / factor : factor;
          const int scaled = scaling->inputs[1 - c];
          const int scaling_index = static_cast<int>(scaling - g->nodes.data());
          if (consumer[static_cast<size_t>(scaled)] == scaling_index)
            consumer[static_cast<size_t>(scaled)] = static_cast<int>(i);
          mm.inputs[k] = scaled;
          removed[static_cast<size_t>(scaling_index)] = true;
          break;
        }
      }
      if (Node* t = sole_producer(mm.inputs[k], "Transpose", i)) {
        std::vector<int64_t> perm = TransposePerm(*t);
        if (!perm.empty() && SgemmReadable(perm)) {
          (k == 0 ? layout.perm_a : layout.perm_b) = perm;
          mm.inputs[k] = t->inputs[0];
          removed[static_cast<size_t>(t - g->nodes.data())] = true;
        }
      }
    }
    const int c = consumer[static_cast<size_t>(mm.outputs[0])];
    if (c >= 0 && !removed[static_cast<size_t>(c)] && g->nodes[static_cast<size_t>(c)].op_type == "Transpose") {
      std::vector<int64_t> perm = TransposePerm(g->nodes[static_cast<size_t>(c)]);
      // The output must keep its rows contiguous: sgemm writes C row by row.
      if (!perm.empty() && perm.back() == static_cast<int64_t>(perm.size()) - 1) {
        layout.perm_y = perm;
        mm.outputs = g->nodes[static_cast<size_t>(c)].outputs;
        removed[static_cast<size_t>(c)] = true;
      }
    }
    mm.matmul_layout = std::move(layout);
  }
  DropRemoved(g, removed);
}

namespace {

bool IsConv2d(const Graph& g, const Node& n) {
  if (n.op_type != "Conv" || n.inputs.size() < 2 || n.inputs[1] == kNoValue) return false;
  const Value& w = g.values[static_cast<size_t>(n.inputs[1])];
  return w.constant && w.constant->rank() == 4;
}

}  // namespace

void AssignChannelsLast(Graph* g) {
  std::vector<bool> is_output(g->values.size(), false);
  for (int o : g->outputs) is_output[static_cast<size_t>(o)] = true;
  // 2-D pools only. Static shapes are often unknown here, so MaxPool/AveragePool are told
  // by their 2-D kernel_shape; a global pool's input is 4-D whenever it is channels-last
  // (only 2-D convolutions and pools produce such values).
  auto is_pool = [&](const Node& n) {
    if (n.outputs.size() != 1 || n.inputs.empty() || n.inputs[0] == kNoValue) return false;
    if (n.op_type == "GlobalMaxPool" || n.op_type == "GlobalAveragePool") return true;
    if (n.op_type != "MaxPool" && n.op_type != "AveragePool") return false;
    auto kernel = n.attributes.GetInts("kernel_shape", {});
    return kernel.ok() && kernel->size() == 2;
  };
  auto is_global = [](const Node& n) { return n.op_type == "GlobalMaxPool" || n.op_type == "GlobalAveragePool"; };
  // For each value: can every reader take it channels-last?
  std::vector<bool> readers_ok(g->values.size(), true);
  for (const Node& n : g->nodes) {
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      int v = n.inputs[k];
      if (v == kNoValue) continue;
      bool ok = (IsConv2d(*g, n) && (k == 0 || (k == 3 && n.fused_sum))) || (is_pool(n) && k == 0);
      if (!ok) readers_ok[static_cast<size_t>(v)] = false;
    }
  }
  for (const Node& n : g->nodes) {
    bool conv = IsConv2d(*g, n) && n.outputs.size() == 1;
    if (!conv && !(is_pool(n) && !is_global(n))) continue;
    size_t v = static_cast<size_t>(n.outputs[0]);
    if (!is_output[v] && readers_ok[v]) g->values[v].nhwc = true;
  }
}

}  // namespace mf::runtime
