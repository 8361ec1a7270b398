// modelfleet-run: load an ONNX model with the ModelFleet runtime, run it on .npy inputs, print
// the outputs (shape and first values) and latency figures; optionally write outputs as .npy.
//
//   modelfleet-run model.onnx --input x.npy [--input y.npy] [--backend cpu|cuda] [--precision fp16] [--iterations 10]
//   modelfleet-run --list-ops        # Markdown table of supported operators (docs/ops.md)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "common/flags.h"
#include "common/malloc_tuning.h"
#include "runtime/backend.h"
#include "runtime/npy.h"
#include "runtime/session.h"
#include "runtime/tensor.h"
#include "tools/run/ops_table.h"

namespace {

using mf::runtime::Tensor;

// --input may repeat, which FlagSet does not model: take every occurrence out of argv first.
std::vector<std::string> ExtractRepeated(std::vector<const char*>* args, const std::string& name) {
  std::vector<std::string> values;
  std::vector<const char*> rest;
  const std::string flag = "--" + name, prefix = flag + "=";
  for (size_t i = 0; i < args->size(); ++i) {
    std::string a = (*args)[i];
    if (a == flag && i + 1 < args->size()) {
      values.push_back((*args)[++i]);
    } else if (a.rfind(prefix, 0) == 0) {
      values.push_back(a.substr(prefix.size()));
    } else {
      rest.push_back((*args)[i]);
    }
  }
  *args = rest;
  return values;
}

void PrintTensor(const std::string& name, const Tensor& t, int max_values) {
  std::printf("%s: %s %s [", name.c_str(), std::string(mf::runtime::DataTypeName(t.dtype())).c_str(),
              mf::runtime::ShapeToString(t.shape()).c_str());
  int64_t n = std::min<int64_t>(t.num_elements(), max_values);
  for (int64_t i = 0; i < n; ++i) {
    if (i) std::printf(", ");
    switch (t.dtype()) {
      case mf::runtime::DataType::kFloat32:
        std::printf("%.6g", t.data<float>()[i]);
        break;
      case mf::runtime::DataType::kFloat64:
        std::printf("%.6g", t.data<double>()[i]);
        break;
      case mf::runtime::DataType::kInt64:
        std::printf("%lld", static_cast<long long>(t.data<int64_t>()[i]));
        break;
      case mf::runtime::DataType::kInt32:
        std::printf("%d", t.data<int32_t>()[i]);
        break;
      case mf::runtime::DataType::kBool:
        std::printf("%s", t.data<bool>()[i] ? "true" : "false");
        break;
      default:
        std::printf("?");
        break;
    }
  }
  std::printf("%s]\n", t.num_elements() > n ? ", ..." : "");
}

int Fail(const mf::Status& s) {
  std::fprintf(stderr, "modelfleet-run: %s\n", s.ToString().c_str());
  return s.code() == mf::StatusCode::kInvalidArgument ? 2 : 1;
}

}  // namespace

// Times every node over `runs` runs; prints per op type (nodes, mean ms per run, share) and the
// `top` slowest nodes.
mf::Status PrintProfile(const mf::runtime::Session& session, const std::vector<const Tensor*>& inputs, int runs,
                        int top) {
  std::vector<Tensor> outputs;
  std::vector<mf::runtime::Session::NodeTime> times;
  std::map<std::string, std::pair<int, double>> by_op;            // op type -> nodes per run, seconds in all runs
  std::map<std::string, std::pair<std::string, double>> by_node;  // name -> op type, seconds in all runs
  double total = 0;
  for (int r = 0; r < runs; ++r) {
    MF_RETURN_IF_ERROR(session.RunTimed(inputs, &outputs, &times));
    for (const auto& t : times) {
      auto& [count, seconds] = by_op[t.op_type];
      if (r == 0) ++count;
      seconds += t.seconds;
      by_node[t.name] = {t.op_type, by_node[t.name].second + t.seconds};
      total += t.seconds;
    }
  }
  std::vector<std::pair<double, std::string>> ops;
  for (const auto& [op, v] : by_op) ops.emplace_back(v.second, op);
  std::sort(ops.rbegin(), ops.rend());
  std::printf("\nper op type, mean of %d runs (%.3f ms per run in nodes):\n%-28s %6s %10s %7s\n", runs,
              total * 1e3 / runs, "op", "nodes", "ms/run", "share");
  for (const auto& [seconds, op] : ops) {
    std::printf("%-28s %6d %10.4f %6.1f%%\n", op.c_str(), by_op[op].first, seconds * 1e3 / runs, 100 * seconds / total);
  }
  std::vector<std::pair<double, std::string>> nodes;
  for (const auto& [name, v] : by_node) nodes.emplace_back(v.second, name);
  std::sort(nodes.rbegin(), nodes.rend());
  std::printf("\nslowest nodes:\n");
  for (size_t i = 0; i < std::min<size_t>(static_cast<size_t>(top), nodes.size()); ++i) {
    std::printf("%-48s %-20s %8.4f ms\n", nodes[i].second.c_str(), by_node[nodes[i].second].first.c_str(),
                nodes[i].first * 1e3 / runs);
  }
  return mf::Status::Ok();
}

int main(int argc, char** argv) {
  mf::TuneMallocForReusedBuffers();  // as the server does
  mf::runtime::KeepLargeBuffersForReuse(size_t{256} << 20);
  std::vector<const char*> args(argv, argv + argc);
  std::vector<std::string> inputs = ExtractRepeated(&args, "input");

  mf::FlagSet flags("modelfleet-run MODEL.onnx --input X.npy [--input Y.npy ...]",
                    "Runs an ONNX model with the ModelFleet runtime on .npy inputs (in the model's input order, or "
                    "name=path) and prints outputs and timings.");
  std::string backend_name = "cpu", precision_name = "fp32", output_dir;
  int threads = 0, iterations = 1, warmup = 1, show = 8, profile_nodes = 10;
  bool list_ops = false, no_optimize = false, profile = false;
  flags.Add("backend", &backend_name, "cpu | cuda");
  flags.Add("precision", &precision_name, "fp32 | tf32 | fp16 (tf32 and fp16 change only the cuda backend)");
  flags.Add("threads", &threads, "intra-op threads (0: one per core)");
  flags.Add("iterations", &iterations, "timed runs");
  flags.Add("warmup", &warmup, "untimed runs before timing");
  flags.Add("show", &show, "values printed per output");
  flags.Add("output_dir", &output_dir, "write each output as <dir>/output_<i>.npy");
  flags.Add("list_ops", &list_ops, "print the supported-operator table (Markdown) and exit");
  flags.Add("no_optimize", &no_optimize, "skip graph rewrites (folding, fusion)");
  flags.Add("profile", &profile,
            "after the timed runs, time every node over --iterations more runs and print the time per op type and "
            "the slowest nodes (cpu)");
  flags.Add("profile_nodes", &profile_nodes, "how many of the slowest nodes --profile prints");
  if (auto s = flags.Parse(static_cast<int>(args.size()), args.data()); !s.ok()) {
    std::fprintf(stderr, "%s\n%s", s.message().c_str(), flags.Usage().c_str());
    return 2;
  }
  if (flags.help_requested()) {
    std::printf("%s", flags.Usage().c_str());
    return 0;
  }
  mf::runtime::SessionOptions options;
  if (!mf::runtime::BackendFromName(backend_name, &options.backend)) {
    return Fail(mf::InvalidArgument("unknown backend '" + backend_name + "' (cpu | cuda)"));
  }
  if (list_ops) {
    auto registry = mf::runtime::KernelsFor(options.backend);
    if (!registry.ok()) return Fail(registry.status());
    std::printf("%s", mf::runtime::RenderOpsTable(**registry, backend_name).c_str());
    return 0;
  }
  if (flags.positional().size() != 1) {
    std::fprintf(stderr, "expected exactly one model path\n%s", flags.Usage().c_str());
    return 2;
  }
  if (iterations < 1 || warmup < 0 || threads < 0 || profile_nodes < 0)
    return Fail(mf::InvalidArgument("--iterations must be >= 1, --warmup, --threads and --profile_nodes >= 0"));
  options.threads = threads;
  options.optimize = !no_optimize;
  if (!mf::runtime::PrecisionFromName(precision_name, &options.precision)) {
    return Fail(mf::InvalidArgument("unknown precision '" + precision_name + "' (fp32 | tf32 | fp16 | bf16)"));
  }

  auto t0 = std::chrono::steady_clock::now();
  auto session = mf::runtime::Session::Load(flags.positional()[0], options);
  if (!session.ok()) return Fail(session.status());
  double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  mf::ReturnFreedHeapToOs();  // the plain copies of packed weights, as the server does after a load
  const auto& sig = (*session)->signature();
  if (options.backend == mf::runtime::Backend::kCuda) {
    const mf::runtime::NodePlacement& p = (*session)->placement();
    std::string ops;
    for (const std::string& op : p.fallback_ops) ops += (ops.empty() ? " (" : ", ") + op;
    std::printf("placement: %d nodes on the GPU, %d shape nodes on the host, %d CPU fallbacks%s\n", p.device, p.host,
                p.fallback, ops.empty() ? "" : (ops + ")").c_str());
  }

  std::vector<Tensor> tensors(sig.inputs.size());
  std::vector<bool> given(sig.inputs.size(), false);
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string spec = inputs[i], path = spec;
    size_t idx = i;
    if (size_t eq = spec.find('='); eq != std::string::npos && !std::filesystem::exists(spec)) {
      int found = sig.InputIndex(spec.substr(0, eq));
      if (found < 0) return Fail(mf::InvalidArgument("the model has no input named '" + spec.substr(0, eq) + "'"));
      idx = static_cast<size_t>(found);
      path = spec.substr(eq + 1);
    }
    if (idx >= sig.inputs.size()) return Fail(mf::InvalidArgument("more --input files than model inputs"));
    auto t = mf::runtime::ReadNpyFile(path);
    if (!t.ok()) return Fail(t.status());
    tensors[idx] = std::move(t).value();
    given[idx] = true;
  }
  std::vector<const Tensor*> ptrs;
  for (size_t i = 0; i < sig.inputs.size(); ++i) {
    if (!given[i]) return Fail(mf::InvalidArgument("no --input for model input '" + sig.inputs[i].name + "'"));
    ptrs.push_back(&tensors[i]);
  }

  std::vector<Tensor> outputs;
  for (int i = 0; i < warmup; ++i) {
    if (auto s = (*session)->Run(ptrs, &outputs); !s.ok()) return Fail(s);
  }
  std::vector<double> ms;
  for (int i = 0; i < iterations; ++i) {
    auto s0 = std::chrono::steady_clock::now();
    if (auto s = (*session)->Run(ptrs, &outputs); !s.ok()) return Fail(s);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s0).count());
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    PrintTensor(sig.outputs[i].name, outputs[i], show);
    if (!output_dir.empty()) {
      std::string path = (std::filesystem::path(output_dir) / ("output_" + std::to_string(i) + ".npy")).string();
      if (auto s = mf::runtime::WriteNpyFile(path, outputs[i]); !s.ok()) return Fail(s);
    }
  }
  std::sort(ms.begin(), ms.end());
  double sum = 0;
  for (double v : ms) sum += v;
  auto pct = [&](double p) {
    return ms[std::min(ms.size() - 1, static_cast<size_t>(p * static_cast<double>(ms.size())))];
  };
  std::printf("load %.1f ms, memory %.1f MiB; %d runs: mean %.3f ms, p50 %.3f ms, p90 %.3f ms, min %.3f ms\n", load_ms,
              static_cast<double>((*session)->memory_bytes()) / (1 << 20), iterations,
              sum / static_cast<double>(ms.size()), pct(0.5), pct(0.9), ms.front());
  if (profile) {
    if (auto s = PrintProfile(**session, ptrs, iterations, profile_nodes); !s.ok()) return Fail(s);
  }
  return 0;
}
