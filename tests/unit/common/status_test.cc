#include "common/status.h"

#include <gtest/gtest.h>

namespace mf {
namespace {

StatusOr<int> Half(int x) {
  if (x % 2) return InvalidArgument("odd: " + std::to_string(x));
  return x / 2;
}

Status Quarter(int x, int* out) {
  MF_ASSIGN_OR_RETURN(int half, Half(x));
  MF_ASSIGN_OR_RETURN(*out, Half(half));
  return Status::Ok();
}

TEST(StatusTest, CodesMapToTfServingHttpStatuses) {
  EXPECT_EQ(HttpStatusFor(StatusCode::kOk), 200);
  EXPECT_EQ(HttpStatusFor(StatusCode::kInvalidArgument), 400);
  EXPECT_EQ(HttpStatusFor(StatusCode::kNotFound), 404);
  EXPECT_EQ(HttpStatusFor(StatusCode::kFailedPrecondition), 400);
  EXPECT_EQ(HttpStatusFor(StatusCode::kResourceExhausted), 429);
  EXPECT_EQ(HttpStatusFor(StatusCode::kUnavailable), 503);
  EXPECT_EQ(HttpStatusFor(StatusCode::kDeadlineExceeded), 504);
  EXPECT_EQ(HttpStatusFor(StatusCode::kCancelled), 499);
  EXPECT_EQ(HttpStatusFor(StatusCode::kUnimplemented), 501);
}

TEST(StatusTest, ToStringAndContext) {
  Status s = NotFound("no model m");
  EXPECT_EQ(s.ToString(), "NOT_FOUND: no model m");
  EXPECT_EQ(s.WithContext("loading").message(), "loading: no model m");
  EXPECT_EQ(Status::Ok().ToString(), "OK");
}

TEST(StatusTest, AssignOrReturnPropagatesTheFirstError) {
  int out = 0;
  EXPECT_TRUE(Quarter(8, &out).ok());
  EXPECT_EQ(out, 2);
  Status s = Quarter(6, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "odd: 3");
}

}  // namespace
}  // namespace mf
