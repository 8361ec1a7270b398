// Which values the input shapes fix (runtime/shape_values.h), table-driven over small graphs
// written as lines of "outputs = Op(inputs)".
#include "runtime/graph/shape_values.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <sstream>

#include "runtime/tensor.h"

namespace mf::runtime {
namespace {

struct Case {
  std::string name;
  std::vector<std::string> constants;
  std::vector<std::string> nodes;  // "a,b = Op(x,,c)": an empty name is an omitted input
  std::vector<std::string> fixed;  // the values expected fixed, besides the constants
};

std::vector<std::string> SplitNames(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  for (std::string name; std::getline(in, name, ',');) out.push_back(name);
  return out;
}

// Graph input "x"; every other name is a constant or a node's output.
Graph Build(const Case& c) {
  Graph g;
  std::map<std::string, int> ids;
  const auto id = [&](const std::string& name) {
    if (name.empty()) return kNoValue;
    auto it = ids.find(name);
    if (it != ids.end()) return it->second;
    Value v;
    v.name = name;
    return ids[name] = g.AddValue(std::move(v));
  };
  g.inputs.push_back(id("x"));
  for (const std::string& name : c.constants) {
    g.values[static_cast<size_t>(id(name))].constant =
        std::make_shared<Tensor>(Tensor::ShapeOnly(DataType::kInt64, {1}));
  }
  for (const std::string& line : c.nodes) {
    const size_t eq = line.find(" = "), open = line.find('('), close = line.rfind(')');
    Node node;
    node.op_type = line.substr(eq + 3, open - eq - 3);
    for (const std::string& out : SplitNames(line.substr(0, eq))) node.outputs.push_back(id(out));
    for (const std::string& in : SplitNames(line.substr(open + 1, close - open - 1))) node.inputs.push_back(id(in));
    g.nodes.push_back(std::move(node));
  }
  return g;
}

class FixedByInputShapesTest : public ::testing::TestWithParam<Case> {};

TEST_P(FixedByInputShapesTest, Classifies) {
  const Case& c = GetParam();
  const Graph g = Build(c);
  const std::vector<bool> fixed = ValuesFixedByInputShapes(g);
  std::vector<std::string> got;
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (fixed[v] && !g.values[v].constant) got.push_back(g.values[v].name);
  }
  std::sort(got.begin(), got.end());
  std::vector<std::string> want = c.fixed;
  std::sort(want.begin(), want.end());
  EXPECT_EQ(got, want);
}

INSTANTIATE_TEST_SUITE_P(
    Graphs, FixedByInputShapesTest,
    ::testing::Values(
        // torch.onnx's dynamic reshape: the shape chain is fixed, the reshaped data is not.
        Case{"dynamic_reshape",
             {"zero", "axes", "minus_one"},
             {"s = Shape(x)", "n = Gather(s,zero)", "u = Unsqueeze(n,axes)", "target = Concat(u,minus_one)",
              "y = Reshape(x,target)"},
             {"s", "n", "u", "target"}},
        // Shapes through ops whose output shape follows from their inputs' shapes.
        Case{"through_compute",
             {"w", "zero"},
             {"h = MatMul(x,w)", "a = Add(h,x)", "l = LayerNormalization(a,w,)", "s = Shape(l)", "d = Gather(s,zero)",
              "f = Cast(d)", "r = Div(f,f)"},
             {"s", "d", "f", "r"}},
        // A data-dependent shape ends it, and so does what is computed from data.
        Case{"nonzero", {}, {"nz = NonZero(x)", "s = Shape(nz)", "t = Shape(x)"}, {"t"}},
        Case{"reshape_by_data", {"zero"}, {"c = Cast(x)", "y = Reshape(x,c)", "s = Shape(y)", "t = Shape(c)"}, {"t"}},
        Case{"slice_by_data", {"zero"}, {"y = Slice(x,zero,x)", "s = Shape(y)"}, {}},
        Case{"slice_by_shape",
             {"zero", "one"},
             {"s = Shape(x)", "e = Gather(s,one)", "y = Slice(x,zero,e)", "t = Shape(y)"},
             {"s", "e", "t"}},
        // Ops it does not know, fused or custom, end both properties.
        Case{"unknown_op", {}, {"y = FusedSomething(x)", "s = Shape(y)", "z = Size(x)"}, {"z"}},
        // Constants alone are fixed (folded at load anyway); Range over fixed bounds too.
        Case{"range",
             {"zero", "one"},
             {"s = Shape(x)", "n = Gather(s,zero)", "r = Range(zero,n,one)", "e = Expand(x,s)", "t = Shape(e)"},
             {"s", "n", "r", "t"}}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace mf::runtime
