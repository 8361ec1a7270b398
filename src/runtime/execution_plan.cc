#include "runtime/execution_plan.h"

#include <algorithm>
#include <chrono>
#include <unordered_set>

#include "runtime/graph/bind.h"
#include "runtime/graph/shape_values.h"

namespace mf::runtime {

StatusOr<std::unique_ptr<ExecutionPlan>> ExecutionPlan::Create(Graph graph, const KernelRegistry& registry) {
  std::unique_ptr<ExecutionPlan> plan(new ExecutionPlan());
  plan->graph_ = std::move(graph);
  Graph& g = plan->graph_;
  std::vector<int> last_use(g.values.size(), -1);
  const std::vector<int> uses = CountUses(g);
  plan->readers_.resize(g.values.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    MF_ASSIGN_OR_RETURN(BoundKernel bound, BindNode(g, g.nodes[i], registry, Precision::kFp32, &uses));
    plan->steps_.push_back(Step{i, std::move(bound.kernel), {}});
    const std::vector<int>& inputs = g.nodes[i].inputs;
    for (size_t k = 0; k < inputs.size(); ++k) {
      if (inputs[k] == kNoValue) continue;
      last_use[static_cast<size_t>(inputs[k])] = static_cast<int>(i);
      if (g.values[static_cast<size_t>(inputs[k])].constant)
        plan->readers_[static_cast<size_t>(inputs[k])].push_back({i, k});
    }
  }
  std::unordered_set<int> keep(g.outputs.begin(), g.outputs.end());
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (g.values[v].constant) continue;
    if (last_use[v] >= 0 && !keep.count(static_cast<int>(v))) {
      plan->steps_[static_cast<size_t>(last_use[v])].release.push_back(static_cast<int>(v));
    }
  }
  plan->constant_bytes_ = plan->CountConstantBytes();
  const std::vector<bool> fixed = ValuesFixedByInputShapes(g);
  for (const Step& step : plan->steps_) {
    const Node& node = g.nodes[step.node];
    bool all_fixed = !node.outputs.empty(), reads_computed = false;
    for (int v : node.outputs) all_fixed = all_fixed && (v == kNoValue || fixed[static_cast<size_t>(v)]);
    for (int v : node.inputs) reads_computed |= v != kNoValue && !g.values[static_cast<size_t>(v)].constant;
    plan->fixed_step_.push_back(all_fixed && reads_computed);
    plan->any_fixed_step_ |= plan->fixed_step_.back();
  }
  return plan;
}

namespace {
// Fixed outputs above this size (a ConstantOfShape of a whole activation) are computed per run.
constexpr size_t kMaxFixedOutputBytes = size_t{16} << 10;
// Input signatures whose fixed outputs a plan keeps (dynamic batching uses a handful).
constexpr size_t kMaxFixedSignatures = 16;

// Copies a step's outputs into `kept`, or leaves it empty (computed every run) when one is large.
void KeepOutputs(const Node& node, const std::vector<Tensor>& owned, std::vector<Tensor>* kept) {
  for (int v : node.outputs) {
    if (v != kNoValue && owned[static_cast<size_t>(v)].byte_size() > kMaxFixedOutputBytes) return;
  }
  for (int v : node.outputs) kept->push_back(v == kNoValue ? Tensor() : owned[static_cast<size_t>(v)].Clone());
}
}  // namespace

std::shared_ptr<const ExecutionPlan::FixedOutputs> ExecutionPlan::FindFixedOutputs(const std::string& signature) const {
  std::lock_guard lock(fixed_mu_);
  auto it = fixed_outputs_.find(signature);
  return it == fixed_outputs_.end() ? nullptr : it->second;
}

void ExecutionPlan::KeepFixedOutputs(const std::string& signature, std::shared_ptr<const FixedOutputs> outputs) const {
  std::lock_guard lock(fixed_mu_);
  if (fixed_outputs_.size() < kMaxFixedSignatures) fixed_outputs_.emplace(signature, std::move(outputs));
}

size_t ExecutionPlan::CountConstantBytes() const {
  // Only constants something still reads (or outputs) count toward the model's memory; a tensor
  // shared by several values counts once.
  const std::vector<int> uses = CountUses(graph_);
  std::unordered_set<const Tensor*> counted;
  size_t bytes = 0;
  for (size_t v = 0; v < graph_.values.size(); ++v) {
    const Tensor* constant = graph_.values[v].constant.get();
    if (constant && uses[v] > 0 && constant->raw_data() && counted.insert(constant).second)
      bytes += constant->byte_size();
  }
  return bytes;
}

size_t ExecutionPlan::kernel_owned_bytes() const {
  size_t bytes = 0;
  for (const Step& step : steps_) bytes += step.kernel->owned_bytes();
  return bytes;
}

bool ExecutionPlan::ReadersOwnCopies(int value) const {
  const std::vector<Reader>& readers = readers_[static_cast<size_t>(value)];
  if (readers.empty()) return false;
  if (std::find(graph_.outputs.begin(), graph_.outputs.end(), value) != graph_.outputs.end()) return false;
  return std::all_of(readers.begin(), readers.end(),
                     [&](const Reader& r) { return steps_[r.step].kernel->OwnsCopyOfInput(r.input); });
}

bool ExecutionPlan::DropIfOwned(int value) {
  std::shared_ptr<const Tensor>& constant = graph_.values[static_cast<size_t>(value)].constant;
  if (!constant || !constant->raw_data() || !ReadersOwnCopies(value)) return false;
  // Another value may share the tensor (and still need it); otherwise its pages go now.
  if (constant.use_count() == 1) ReleaseResidentPages(constant->raw_data(), constant->byte_size());
  constant = std::make_shared<const Tensor>(Tensor::ShapeOnly(constant->dtype(), constant->shape()));
  return true;
}

size_t ExecutionPlan::DropConstantsKernelsOwn() {
  for (size_t v = 0; v < graph_.values.size(); ++v) DropIfOwned(static_cast<int>(v));
  const size_t before = constant_bytes_;
  constant_bytes_ = CountConstantBytes();
  return before - constant_bytes_;
}

Status ExecutionPlan::WarmUp(const std::vector<const Tensor*>& inputs, std::vector<Tensor>* outputs,
                             size_t* peak_bytes) {
  // Each constant goes as soon as its last reader has packed it, not at the end: the plain and
  // packed copies of all the weights never coexist, only those of one node.
  Status s = RunSteps(inputs, outputs, peak_bytes, [this](const Step& step, std::vector<const Tensor*>& frame) {
    for (int v : graph_.nodes[step.node].inputs) {
      if (v != kNoValue && DropIfOwned(v))
        frame[static_cast<size_t>(v)] = graph_.values[static_cast<size_t>(v)].constant.get();
    }
  });
  DropConstantsKernelsOwn();
  return s;
}

Status ExecutionPlan::Run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>* outputs,
                          size_t* peak_bytes) const {
  return RunSteps(inputs, outputs, peak_bytes, nullptr);
}

Status ExecutionPlan::RunTimed(const std::vector<const Tensor*>& inputs, std::vector<Tensor>* outputs,
                               std::vector<size_t>* nodes, std::vector<double>* seconds) const {
  nodes->clear();
  seconds->clear();
  auto last = std::chrono::steady_clock::now();
  return RunSteps(inputs, outputs, nullptr, [&](const Step& step, std::vector<const Tensor*>&) {
    const auto now = std::chrono::steady_clock::now();
    nodes->push_back(step.node);
    seconds->push_back(std::chrono::duration<double>(now - last).count());
    last = now;
  });
}

bool ExecutionPlan::Donatable(const Step& step, int value, const std::vector<const Tensor*>& ptr,
                              const std::vector<Tensor>& owned) const {
  if (value == kNoValue || ptr[static_cast<size_t>(value)] != &owned[static_cast<size_t>(value)]) return false;
  if (std::find(step.release.begin(), step.release.end(), value) == step.release.end()) return false;
  const std::vector<int>& inputs = graph_.nodes[step.node].inputs;
  return std::count(inputs.begin(), inputs.end(), value) == 1 && !graph_.nodes[step.node].outputs.empty();
}

Status ExecutionPlan::RunSteps(const std::vector<const Tensor*>& inputs, std::vector<Tensor>* outputs,
                               size_t* peak_bytes, const AfterStep& after_step) const {
  const Graph& g = graph_;
  const std::string signature = MemoryPatterns::Signature(inputs);
  // Before the frame, so that the frame's buffers are freed while the run is still active.
  MemoryPatterns::Run memory(memory_patterns_, signature);
  // The fixed outputs of an earlier run at these shapes, or those this run keeps.
  std::shared_ptr<const FixedOutputs> fixed = any_fixed_step_ ? FindFixedOutputs(signature) : nullptr;
  std::shared_ptr<FixedOutputs> keeping;
  if (any_fixed_step_ && !fixed) {
    keeping = std::make_shared<FixedOutputs>();
    keeping->by_step.resize(steps_.size());
  }
  // The frame: owned intermediates plus a read pointer for every value.
  std::vector<Tensor> owned(g.values.size());
  std::vector<const Tensor*> ptr(g.values.size(), nullptr);
  for (size_t v = 0; v < g.values.size(); ++v) ptr[v] = g.values[v].constant.get();
  for (size_t i = 0; i < g.inputs.size(); ++i) ptr[static_cast<size_t>(g.inputs[i])] = inputs[i];
  size_t live = 0, peak = 0;

  std::vector<const Tensor*> in;
  std::vector<Tensor> out;
  const auto release = [&](const Step& step) {
    for (int v : step.release) {
      live -= owned[static_cast<size_t>(v)].byte_size();
      owned[static_cast<size_t>(v)] = Tensor();
      ptr[static_cast<size_t>(v)] = nullptr;
    }
  };
  for (size_t i = 0; i < steps_.size(); ++i) {
    const Step& step = steps_[i];
    const Node& node = g.nodes[step.node];
    if (fixed && !fixed->by_step[i].empty()) {  // computed by an earlier run at these shapes
      for (size_t k = 0; k < node.outputs.size(); ++k) {
        if (node.outputs[k] != kNoValue) ptr[static_cast<size_t>(node.outputs[k])] = &fixed->by_step[i][k];
      }
      release(step);
      continue;
    }
    in.clear();
    for (int v : node.inputs) {
      const Tensor* t = v == kNoValue ? nullptr : ptr[static_cast<size_t>(v)];
      if (v != kNoValue && !t)
        return Internal(Graph::Describe(node) + ": input '" + g.values[static_cast<size_t>(v)].name +
                        "' was not computed");
      in.push_back(t);
    }
    out.clear();
    out.resize(node.outputs.size());
    if (const int k = step.kernel->in_place_input(); k >= 0 && static_cast<size_t>(k) < in.size()) {
      const int v = node.inputs[static_cast<size_t>(k)];
      if (Donatable(step, v, ptr, owned)) {
        live -= owned[static_cast<size_t>(v)].byte_size();
        out[0] = std::move(owned[static_cast<size_t>(v)]);
        owned[static_cast<size_t>(v)] = Tensor();
        ptr[static_cast<size_t>(v)] = nullptr;
        in[static_cast<size_t>(k)] = &out[0];
      }
    }
    Status s = step.kernel->Run(in, out);
    if (!s.ok()) return s.WithContext(Graph::Describe(node));
    if (after_step) after_step(step, ptr);
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      int v = node.outputs[k];
      if (v == kNoValue) continue;
      live += out[k].byte_size();
      owned[static_cast<size_t>(v)] = std::move(out[k]);
      ptr[static_cast<size_t>(v)] = &owned[static_cast<size_t>(v)];
    }
    peak = std::max(peak, live);
    if (keeping && fixed_step_[i]) KeepOutputs(node, owned, &keeping->by_step[i]);
    release(step);
  }
  if (peak_bytes) *peak_bytes = peak;

  outputs->clear();
  outputs->reserve(g.outputs.size());
  std::vector<bool> moved(g.values.size(), false);
  for (int v : g.outputs) {
    size_t idx = static_cast<size_t>(v);
    bool is_owned = ptr[idx] == &owned[idx];
    if (is_owned && !moved[idx]) {
      // Moved out unless a later output names the same value again.
      if (std::count(g.outputs.begin(), g.outputs.end(), v) == 1) {
        outputs->push_back(std::move(owned[idx]));
        moved[idx] = true;
        continue;
      }
    }
    if (!ptr[idx]) return Internal("graph output '" + g.values[idx].name + "' was not computed");
    outputs->push_back(ptr[idx]->Clone());
  }
  memory.Succeeded();
  if (keeping) KeepFixedOutputs(signature, std::move(keeping));
  return Status::Ok();
}

}  // namespace mf::runtime
