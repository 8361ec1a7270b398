// spec.autoscaling.prometheus: the query per version and the value read from Prometheus' answers
// (shapes as /api/v1/query returns them).
#include "metrics_feed/prometheus_query.h"

#include <gtest/gtest.h>

namespace mf::op {
namespace {

TEST(PrometheusQueryTest, ExpandsThePlaceholdersPerVersion) {
  EXPECT_EQ(ExpandPrometheusQuery(
                R"(sum(rate(x{namespace="$namespace",modeldeployment="$modeldeployment",version="$version"}[1m])))",
                "ml", "mnist", "v2"),
            R"(sum(rate(x{namespace="ml",modeldeployment="mnist",version="v2"}[1m])))");
  EXPECT_EQ(ExpandPrometheusQuery("queue_length", "ml", "mnist", "v1"), "queue_length");
  EXPECT_EQ(ExpandPrometheusQuery("$version+$version", "ml", "m", "v1"), "v1+v1");
}

TEST(PrometheusQueryTest, UrlKeepsAPathPrefixAndEncodesTheQuery) {
  EXPECT_EQ(PrometheusQueryUrl("http://prometheus.monitoring.svc:9090", R"(sum(x{a="b"}))"),
            "http://prometheus.monitoring.svc:9090/api/v1/query?query=sum%28x%7Ba%3D%22b%22%7D%29");
  EXPECT_EQ(PrometheusQueryUrl("http://p:9090/prom/", "up"), "http://p:9090/prom/api/v1/query?query=up");
  EXPECT_EQ(PrometheusQueryUrl("http://p", "a b+c"), "http://p/api/v1/query?query=a%20b%2Bc");
}

TEST(PrometheusQueryTest, ReadsScalarsAndSumsVectors) {
  struct Row {
    const char* body;
    double want;
  };
  const Row rows[] = {
      {R"({"status":"success","data":{"resultType":"scalar","result":[1700000000.5,"45"]}})", 45},
      {R"({"status":"success","data":{"resultType":"vector","result":[
          {"metric":{"pod":"a"},"value":[1700000000,"12.5"]},{"metric":{"pod":"b"},"value":[1700000000,"7.5"]}]}})",
       20},
      {R"({"status":"success","data":{"resultType":"vector","result":[]}})", 0},  // no series yet: no traffic
  };
  for (const Row& row : rows) {
    auto value = ParsePrometheusValue(row.body);
    ASSERT_TRUE(value.ok()) << row.body << ": " << value.status().ToString();
    EXPECT_DOUBLE_EQ(*value, row.want) << row.body;
  }
}

TEST(PrometheusQueryTest, RefusesErrorsAndWhatIsNotARate) {
  struct Row {
    const char* body;
    const char* message;
  };
  const Row rows[] = {
      {R"({"status":"error","errorType":"bad_data","error":"parse error at char 4"})",
       "Prometheus answered bad_data: parse error at char 4"},
      {R"({"status":"success","data":{"resultType":"matrix","result":[]}})", "the query gives a matrix"},
      {R"({"status":"success","data":{"resultType":"scalar","result":[1,"NaN"]}})", "NaN, not a rate"},
      {R"({"status":"success","data":{"resultType":"vector","result":[{"value":[1,"-3"]}]}})", "-3, not a rate"},
      {R"({"status":"success","data":{"resultType":"vector","result":[{"value":[1,"+Inf"]}]}})", "+Inf, not a rate"},
      {R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{}}]}})", "has no value"},
      {R"({"status":"success","data":{"resultType":"scalar","result":[1,2]}})", "not [time, \"value\"]"},
      {R"({"status":"success"})", "no data.result"},
      {"not json", "not a JSON object"},
      {"[]", "not a JSON object"},
  };
  for (const Row& row : rows) {
    auto value = ParsePrometheusValue(row.body);
    ASSERT_FALSE(value.ok()) << row.body;
    EXPECT_EQ(value.status().code(), StatusCode::kInvalidArgument) << row.body;
    EXPECT_NE(value.status().message().find(row.message), std::string::npos)
        << row.body << " -> " << value.status().message();
  }
}

TEST(PrometheusQueryTest, HttpErrorsSayWhatPrometheusSaid) {
  auto bad_query = ParsePrometheusAnswer(
      400, R"({"status":"error","errorType":"bad_data","error":"1:18: parse error: unclosed left parenthesis"})");
  ASSERT_FALSE(bad_query.ok());
  EXPECT_EQ(bad_query.status().message(), "Prometheus answered bad_data: 1:18: parse error: unclosed left parenthesis");
  auto proxy = ParsePrometheusAnswer(502, "<html>Bad Gateway</html>");
  ASSERT_FALSE(proxy.ok());
  EXPECT_EQ(proxy.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(proxy.status().message(), "HTTP 502: <html>Bad Gateway</html>");
  auto ok = ParsePrometheusAnswer(200, R"({"status":"success","data":{"resultType":"scalar","result":[1,"3"]}})");
  ASSERT_TRUE(ok.ok());
  EXPECT_DOUBLE_EQ(*ok, 3);
}

}  // namespace
}  // namespace mf::op
