// The CEL subset evaluator behind CRD validation rules: literals and escapes, CEL's typing
// (no int/double mixing), && || error absorption, macros, the Kubernetes list functions,
// cost limits, and the rules walker that kube-apiserver's custom resource validation runs.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "tools/local/apiserver/cel/json_value.h"
#include "tools/local/apiserver/cel/parser.h"
#include "tools/local/apiserver/cel/program.h"
#include "tools/local/apiserver/cel/rules.h"
#include "tools/local/apiserver/schema.h"

namespace mf::local::cel {
namespace {

using json = nlohmann::json;

StatusOr<Value> Eval(const std::string& text, const json& self = json::object(), const json* old = nullptr) {
  auto program = Program::Compile(text);
  if (!program.ok()) return program.status();
  Value self_value = FromJson(self, nullptr);
  Value old_value = old ? FromJson(*old, nullptr) : Value();
  return (*program)->Evaluate(self_value, old ? &old_value : nullptr);
}

// The rule's boolean result; fails the test on an error or a non-bool.
bool True(const std::string& text, const json& self = json::object()) {
  auto v = Eval(text, self);
  EXPECT_TRUE(v.ok()) << text << ": " << v.status().ToString();
  if (!v.ok()) return false;
  EXPECT_EQ(v->kind(), Value::Kind::kBool) << text;
  return v->kind() == Value::Kind::kBool && v->bool_value();
}

std::string ErrorOf(const std::string& text, const json& self = json::object()) {
  auto v = Eval(text, self);
  EXPECT_FALSE(v.ok()) << text << " evaluated to " << (v.ok() ? v->TypeName() : "");
  return v.ok() ? "" : v.status().message();
}

TEST(CelTest, Literals) {
  EXPECT_TRUE(True("1 == 1 && 0x10 == 16 && 7u == 7u && -9223372036854775808 < 0"));
  EXPECT_TRUE(True("1.5e1 == 15.0 && .5 == 0.5"));
  EXPECT_TRUE(True("'a\\tb' == \"a\\u0009b\" && '\\x41\\101' == 'AA' && r'\\n' == '\\\\n'"));
  EXPECT_TRUE(True("'''multi\nline''' == 'multi\\nline'"));
  EXPECT_TRUE(True("null == null && true != false"));
  EXPECT_TRUE(True("[1, 2, 3][1] == 2 && {'a': 1, 'b': [true]}['b'][0]"));
  EXPECT_TRUE(True("size('héllo') == 5 && size(b'h\\xffi') == 3"));
  EXPECT_TRUE(True("[1, 2,] == [1, 2]"));
}

TEST(CelTest, SyntaxErrorsDoNotCompile) {
  for (const char* bad : {"1 +", "self.", "(1", "'unterminated", "a b", "1 ? 2", "[1, 2", "has(self)", "self.all(1, true)",
                          "9223372036854775808", "'\\q'", "#", ""}) {
    auto p = Program::Compile(bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  auto undeclared = Program::Compile("foo == 1");
  ASSERT_FALSE(undeclared.ok());
  EXPECT_NE(undeclared.status().message().find("undeclared reference to 'foo'"), std::string::npos);
}

TEST(CelTest, UnsupportedFunctionIsUnimplemented) {
  auto p = Program::Compile("self.name.quantity() == 'x'");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(Program::Compile("size(1, 2)").status().code(), StatusCode::kUnimplemented);
}

TEST(CelTest, NestingIsBounded) {
  std::string deep(10000, '(');
  EXPECT_FALSE(Program::Compile(deep + "1" + std::string(10000, ')')).ok());
  std::string chain = "self";
  for (int i = 0; i < 1000; ++i) chain += ".a";
  EXPECT_FALSE(Program::Compile(chain).ok());
  std::string sum = "1";
  for (int i = 0; i < 1000; ++i) sum += " + 1";
  EXPECT_FALSE(Program::Compile(sum).ok());
  std::string nots(5000, '!');
  EXPECT_FALSE(Program::Compile(nots + "true").ok());
}

TEST(CelTest, ArithmeticKeepsCelTyping) {
  EXPECT_TRUE(True("1 + 2 * 3 == 7 && 7 / 2 == 3 && -7 % 3 == -1 && 7.0 / 2.0 == 3.5"));
  EXPECT_TRUE(True("'ab' + 'c' == 'abc' && [1] + [2] == [1, 2] && 3u - 1u == 2u"));
  EXPECT_NE(ErrorOf("1 + 1.0 == 2.0").find("no such overload"), std::string::npos);
  EXPECT_NE(ErrorOf("1 + 1u == 2").find("no such overload"), std::string::npos);
  EXPECT_NE(ErrorOf("1 / 0 == 0").find("division by zero"), std::string::npos);
  EXPECT_NE(ErrorOf("1 % 0 == 0").find("modulus by zero"), std::string::npos);
  EXPECT_NE(ErrorOf("9223372036854775807 + 1 > 0").find("overflow"), std::string::npos);
  EXPECT_NE(ErrorOf("0u - 1u > 0u").find("overflow"), std::string::npos);
  EXPECT_NE(ErrorOf("-(-9223372036854775808) > 0").find("overflow"), std::string::npos);
  EXPECT_TRUE(True("1.0 / 0.0 > 1000000.0"));
  // Comparison across numeric kinds is defined at run time (heterogeneous equality).
  EXPECT_TRUE(True("1 == 1.0 && 2u > 1 && 1 < 1.5"));
  EXPECT_NE(ErrorOf("1 < 'a'").find("no such overload"), std::string::npos);
}

TEST(CelTest, LogicalOperatorsAbsorbErrorsCommutatively) {
  const json self = {{"a", 1}};
  EXPECT_FALSE(True("self.missing == 1 && false", self));
  EXPECT_FALSE(True("false && self.missing == 1", self));
  EXPECT_TRUE(True("self.missing == 1 || true", self));
  EXPECT_TRUE(True("true || self.missing == 1", self));
  EXPECT_NE(ErrorOf("self.missing == 1 && true", self).find("no such key: missing"), std::string::npos);
  EXPECT_NE(ErrorOf("self.missing == 1 || false", self).find("no such key"), std::string::npos);
  EXPECT_NE(ErrorOf("1 && true").find("no such overload"), std::string::npos);
  EXPECT_TRUE(True("!false && !!true"));
  EXPECT_TRUE(True("self.a == 1 ? true : self.missing", self));
}

TEST(CelTest, FieldsHasIndexAndIn) {
  const json self = {{"spec", {{"replicas", 3}, {"labels", {{"app", "web"}}}, {"ports", {80, 443}}}}};
  EXPECT_TRUE(True("self.spec.replicas == 3 && has(self.spec.labels) && !has(self.spec.missing)", self));
  EXPECT_TRUE(True("self.spec.labels['app'] == 'web' && 'app' in self.spec.labels && 443 in self.spec.ports", self));
  EXPECT_TRUE(True("!(22 in self.spec.ports) && size(self.spec.ports) == 2 && self.spec.ports.size() == 2", self));
  EXPECT_NE(ErrorOf("self.spec.ports[2] == 1", self).find("index out of bounds"), std::string::npos);
  EXPECT_NE(ErrorOf("self.spec.labels['x'] == 'y'", self).find("no such key: x"), std::string::npos);
  EXPECT_NE(ErrorOf("self.spec.replicas.x == 1", self).find("does not support field selection"), std::string::npos);
}

TEST(CelTest, EscapedPropertyNames) {
  const json self = {{"max-surge", 1}, {"a.b", 2}, {"x/y", 3}, {"if", 4}, {"c__d", 5}};
  EXPECT_TRUE(True("self.max__dash__surge == 1 && self.a__dot__b == 2 && self.x__slash__y == 3", self));
  EXPECT_TRUE(True("self.__if__ == 4 && self.c__underscores__d == 5 && has(self.max__dash__surge)", self));
}

TEST(CelTest, StringFunctions) {
  const json self = {{"name", "model-v1"}};
  EXPECT_TRUE(True("self.name.startsWith('model') && self.name.endsWith('v1') && self.name.contains('l-v')", self));
  EXPECT_TRUE(True("self.name.matches('^[a-z]+-v[0-9]+$') && matches(self.name, 'v1') && !self.name.matches('^v')", self));
  EXPECT_TRUE(True("'héllo'.indexOf('l') == 2 && [1, 2, 1].lastIndexOf(1) == 2"));
  EXPECT_NE(ErrorOf("'a'.matches('(')").find("invalid regular expression"), std::string::npos);
}

TEST(CelTest, KubernetesStringLibrary) {
  EXPECT_TRUE(True("'MiXed'.lowerAscii() == 'mixed' && 'MiXed'.upperAscii() == 'MIXED' && '  x \\t'.trim() == 'x'"));
  EXPECT_TRUE(True("'héllo'.charAt(1) == 'é' && 'héllo'.charAt(5) == '' && 'héllo'.substring(1, 3) == 'él' && 'abc'.substring(1) == 'bc'"));
  EXPECT_TRUE(True("'a-b-c'.replace('-', '+') == 'a+b+c' && 'a-b-c'.replace('-', '', 1) == 'ab-c' && 'ab'.replace('', '.') == '.a.b.'"));
  EXPECT_TRUE(True("'a,b,,c'.split(',') == ['a', 'b', '', 'c'] && 'a,b,c'.split(',', 2) == ['a', 'b,c'] && 'ab'.split('') == ['a', 'b']"));
  EXPECT_TRUE(True("['a', 'b'].join() == 'ab' && ['a', 'b'].join(', ') == 'a, b' && [].join('-') == ''"));
  EXPECT_NE(ErrorOf("'abc'.charAt(4) == ''").find("index out of range"), std::string::npos);
  EXPECT_NE(ErrorOf("'abc'.substring(2, 1) == ''").find("invalid substring range"), std::string::npos);
  EXPECT_NE(ErrorOf("[1].join() == ''").find("no such overload"), std::string::npos);
  // A replacement that would multiply the text beyond the budget is refused before it is built.
  auto p = Program::Compile("self.s.replace('', self.s) == ''");
  ASSERT_TRUE(p.ok());
  auto big = (*p)->Evaluate(FromJson(json{{"s", std::string(100000, 'x')}}, nullptr), nullptr);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), StatusCode::kResourceExhausted);
}

TEST(CelTest, Conversions) {
  EXPECT_TRUE(True("int('42') == 42 && int(3.9) == 3 && int(7u) == 7 && double(2) == 2.0 && uint(5) == 5u"));
  EXPECT_TRUE(True("string(42) == '42' && string(1.5) == '1.5' && string(true) == 'true' && double('2.5') == 2.5"));
  EXPECT_TRUE(True("type(1) == int && type('a') == string && bool('true')"));
  EXPECT_NE(ErrorOf("int('4x') == 4").find("cannot convert"), std::string::npos);
  EXPECT_NE(ErrorOf("int(1e30) == 0").find("overflow"), std::string::npos);
  EXPECT_NE(ErrorOf("uint(-1) == 0u").find("overflow"), std::string::npos);
}

TEST(CelTest, Macros) {
  const json self = {{"items", {1, 2, 3, 4}}, {"weights", {{"a", 60}, {"b", 40}}}};
  EXPECT_TRUE(True("self.items.all(x, x > 0) && self.items.exists(x, x == 3) && self.items.exists_one(x, x > 3)", self));
  EXPECT_TRUE(True("self.items.map(x, x * 2) == [2, 4, 6, 8] && self.items.filter(x, x % 2 == 0) == [2, 4]", self));
  EXPECT_TRUE(True("self.items.map(x, x > 2, x * 10) == [30, 40]", self));
  EXPECT_TRUE(True("self.weights.all(k, k in ['a', 'b']) && self.weights.map(k, self.weights[k]).sum() == 100", self));
  EXPECT_FALSE(True("self.items.exists_one(x, x > 2)", self));
  // all/exists absorb an error when another element decides.
  EXPECT_FALSE(True("[0, 1].all(x, 1 / x > 5)"));
  EXPECT_TRUE(True("[0, 1].exists(x, 1 / x == 1)"));
  EXPECT_NE(ErrorOf("[0, 1].all(x, 1 / x == 1)").find("division by zero"), std::string::npos);
  // Nested comprehensions shadow and restore their variables.
  EXPECT_TRUE(True("[1, 2].all(x, [3].all(x, x == 3)) && [1, 2].map(x, [10].map(y, x + y)) == [[11], [12]]"));
}

TEST(CelTest, KubernetesListLibrary) {
  EXPECT_TRUE(True("[3, 1, 2].sum() == 6 && [].sum() == 0 && [1.5, 2.5].sum() == 4.0"));
  EXPECT_TRUE(True("[3, 1, 2].min() == 1 && [3, 1, 2].max() == 3 && ['b', 'a'].min() == 'a'"));
  EXPECT_TRUE(True("[1, 2, 2].isSorted() && ![2, 1].isSorted() && [1, 2, 3].indexOf(3) == 2 && [1].indexOf(5) == -1"));
  EXPECT_NE(ErrorOf("[].min() == 0").find("empty list"), std::string::npos);
  EXPECT_NE(ErrorOf("[1, 1.5].sum() > 0").find("no such overload"), std::string::npos);
  EXPECT_NE(ErrorOf("[1, 'a'].max() > 0").find("no such overload"), std::string::npos);
}

TEST(CelTest, CostLimitStopsRunawayEvaluation) {
  auto p = Program::Compile("[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, [1,2,3,4,5,6,7,8,9,10].all(c, "
                            "[1,2,3,4,5,6,7,8,9,10].all(d, [1,2,3,4,5,6,7,8,9,10].all(e, a + b + c + d + e > 0)))))");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  uint64_t used = 0;
  auto small = (*p)->Evaluate(Value(), nullptr, 10000, &used);
  ASSERT_FALSE(small.ok());
  EXPECT_EQ(small.status().code(), StatusCode::kResourceExhausted);
  EXPECT_GT(used, 10000u);
  auto enough = (*p)->Evaluate(Value(), nullptr, kPerCallCostLimit * 10, &used);
  ASSERT_TRUE(enough.ok()) << enough.status().ToString();
  EXPECT_TRUE(enough->bool_value());
}

TEST(CelTest, SchemaTypesDecideIntOrDouble) {
  const json schema = {{"type", "object"}, {"properties", {{"ratio", {{"type", "number"}}}, {"count", {{"type", "integer"}}}}}};
  Value self = FromJson(json{{"ratio", 1}, {"count", 2.0}}, &schema);
  auto p = Program::Compile("self.ratio * 2.0 == 2.0 && self.count * 2 == 4");
  ASSERT_TRUE(p.ok());
  auto v = (*p)->Evaluate(self, nullptr);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_TRUE(v->bool_value());
}

// A ModelDeployment-like schema with the rules of crds/modelfleet.io_modeldeployments.yaml.
json DeploymentSchema() {
  return json::parse(R"json({
    "type": "object",
    "properties": {
      "spec": {
        "type": "object",
        "x-kubernetes-validations": [
          {"rule": "!has(self.traffic) || self.traffic.map(k, self.traffic[k]).sum() == 100",
           "message": "spec.traffic percentages must sum to 100"},
          {"rule": "!has(self.traffic) || self.traffic.all(k, self.versions.exists(v, v.name == k))"}
        ],
        "properties": {
          "replicas": {"type": "integer",
                       "x-kubernetes-validations": [{"rule": "self >= oldSelf", "message": "replicas may not shrink"}]},
          "versions": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
          "traffic": {"type": "object", "additionalProperties": {"type": "integer"}}
        }
      }
    },
    "x-kubernetes-validations": [{"rule": "self.metadata.name.startsWith('md-')"}]
  })json");
}

json Deployment(int a, int b) {
  return {{"apiVersion", "modelfleet.io/v1alpha1"}, {"kind", "ModelDeployment"},
          {"metadata", {{"name", "md-one"}, {"namespace", "default"}, {"uid", "x"}}},
          {"spec", {{"replicas", 2}, {"versions", {{{"name", "a"}}, {{"name", "b"}}}}, {"traffic", {{"a", a}, {"b", b}}}}}};
}

TEST(CelRulesTest, ValidObjectPasses) {
  EXPECT_TRUE(EvaluateValidationRules(Deployment(60, 40), nullptr, DeploymentSchema()).empty());
}

TEST(CelRulesTest, FailedRulesReportPathTypeAndMessage) {
  auto errors = EvaluateValidationRules(Deployment(60, 30), nullptr, DeploymentSchema());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0], "spec: Invalid value: \"object\": spec.traffic percentages must sum to 100");

  json unknown_version = Deployment(60, 40);
  unknown_version["spec"]["traffic"] = {{"a", 60}, {"c", 40}};
  errors = EvaluateValidationRules(unknown_version, nullptr, DeploymentSchema());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0], "spec: Invalid value: \"object\": failed rule: !has(self.traffic) || self.traffic.all(k, self.versions.exists(v, v.name == k))");

  json bad_name = Deployment(60, 40);
  bad_name["metadata"]["name"] = "other";
  errors = EvaluateValidationRules(bad_name, nullptr, DeploymentSchema());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0], "<nil>: Invalid value: \"object\": failed rule: self.metadata.name.startsWith('md-')");
}

TEST(CelRulesTest, TransitionRulesRunOnlyOnUpdate) {
  json shrunk = Deployment(60, 40);
  shrunk["spec"]["replicas"] = 1;
  EXPECT_TRUE(EvaluateValidationRules(shrunk, nullptr, DeploymentSchema()).empty());  // create: no oldSelf
  const json old = Deployment(60, 40);
  auto errors = EvaluateValidationRules(shrunk, &old, DeploymentSchema());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0], "spec.replicas: Invalid value: \"integer\": replicas may not shrink");
  json grown = Deployment(60, 40);
  grown["spec"]["replicas"] = 5;
  EXPECT_TRUE(EvaluateValidationRules(grown, &old, DeploymentSchema()).empty());
}

TEST(CelRulesTest, EvaluationErrorsAndCostAreReported) {
  const json schema = json::parse(R"json({"type": "object", "x-kubernetes-validations": [
      {"rule": "self.missing == 1", "message": "needs missing"},
      {"rule": "self.items.all(a, self.items.all(b, self.items.all(c, a + b + c >= 0)))"}],
      "properties": {"items": {"type": "array", "items": {"type": "integer"}}}})json");
  json object = {{"items", json::array()}};
  for (int i = 0; i < 200; ++i) object["items"].push_back(i);
  auto errors = EvaluateValidationRules(object, nullptr, schema);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0], "<nil>: Invalid value: \"object\": no such key: missing evaluating rule: needs missing");
  EXPECT_EQ(errors[1].rfind("<nil>: Invalid value: \"object\": 'operation cancelled: actual cost limit exceeded': no further "
                            "validation rules will be run due to call cost exceeds limit for rule: self.items.all(", 0), 0u) << errors[1];
}

TEST(CelRulesTest, OverloadErrorsNonBoolResultsAndTheRequestBudget) {
  const json schema = json::parse(R"json({"type": "object", "x-kubernetes-validations": [
      {"rule": "self.port + 1.0 > 0.0"}, {"rule": "self.port"}],
      "properties": {"port": {"x-kubernetes-int-or-string": true}}})json");
  auto errors = EvaluateValidationRules(json{{"port", 80}}, nullptr, schema);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0], "<nil>: Invalid value: \"object\": 'no such overload: _+_(int, double)': call arguments did not match a "
                       "supported operator, function or macro signature for rule: self.port + 1.0 > 0.0");
  EXPECT_EQ(errors[1], "<nil>: Invalid value: \"object\": failed rule: self.port");

  // Sixteen rules of ~650k each: the per-request budget of 10M runs out on the sixteenth.
  json expensive = {{"type", "object"}, {"x-kubernetes-validations", json::array()},
                    {"properties", {{"items", {{"type", "array"}, {"items", {{"type", "integer"}}}}}}}};
  for (int i = 0; i < 16; ++i) {
    expensive["x-kubernetes-validations"].push_back(
        {{"rule", "self.items.all(a, self.items.all(b, a + b >= " + std::to_string(-i) + "))"}});
  }
  json object = {{"items", json::array()}};
  for (int i = 0; i < 330; ++i) object["items"].push_back(i);
  errors = EvaluateValidationRules(object, nullptr, expensive);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0], "<nil>: Invalid value: \"object\": validation failed due to running out of cost budget, no further "
                       "validation rules will be run");
}

TEST(CelRulesTest, UnsupportedFunctionsAreSkippedAndBadRulesRefuseTheCrd) {
  const json schema = json::parse(R"json({"type": "object", "properties": {"spec": {"type": "object",
      "x-kubernetes-validations": [{"rule": "url(self.name).getHost() == self.name"}, {"rule": "self.name =="}]}}})json");
  auto crd_errors = CheckValidationRules(schema, "spec.versions[0].schema.openAPIV3Schema");
  ASSERT_EQ(crd_errors.size(), 1u);
  EXPECT_EQ(crd_errors[0].rfind("spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[1].rule: "
                                "Invalid value: \"self.name ==\": compilation failed: Syntax error", 0), 0u) << crd_errors[0];
  EXPECT_TRUE(EvaluateValidationRules(json{{"spec", {{"name", "X"}}}}, nullptr, schema).empty());
}

TEST(CelRulesTest, SchemaValidationRunsTheRules) {
  auto errors = ValidateAgainstSchema(Deployment(50, 40), DeploymentSchema());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("must sum to 100"), std::string::npos);
  // A structurally invalid object reports the schema errors, not rule failures on bad types.
  json mistyped = Deployment(50, 40);
  mistyped["spec"]["traffic"]["a"] = "fifty";
  errors = ValidateAgainstSchema(mistyped, DeploymentSchema());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("must be of type integer"), std::string::npos);
}

}  // namespace
}  // namespace mf::local::cel
