#include "server/batching/tensor_batch.h"

#include <gtest/gtest.h>

#include "tensor_values.h"

namespace mf::server::batching {
namespace {

using runtime::DataType;
using runtime::Tensor;
using testing::FloatValues;

Tensor Floats(runtime::Shape shape, std::vector<float> values) {
  auto t = Tensor::Allocate(DataType::kFloat32, std::move(shape));
  EXPECT_TRUE(t.ok());
  std::copy(values.begin(), values.end(), t->data<float>());
  return std::move(t).value();
}

TEST(TensorBatchTest, ConcatPadsWithCopiesOfTheFirstRow) {
  Tensor a = Floats({1, 2}, {1, 2});
  Tensor b = Floats({2, 2}, {3, 4, 5, 6});
  auto batch = ConcatAndPad({&a, &b}, 1);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  EXPECT_EQ(batch->shape(), (runtime::Shape{4, 2}));
  EXPECT_EQ(FloatValues(*batch), (std::vector<float>{1, 2, 3, 4, 5, 6, 1, 2}));
}

TEST(TensorBatchTest, RefusesMismatchedShapesAndTypes) {
  Tensor a = Floats({1, 2}, {1, 2});
  Tensor b = Floats({1, 3}, {1, 2, 3});
  EXPECT_EQ(ConcatAndPad({&a, &b}, 0).status().code(), StatusCode::kInvalidArgument);
  auto ints = Tensor::Allocate(DataType::kInt32, {1, 2});
  EXPECT_FALSE(SameBatchShape(a, *ints));
  auto scalar = Tensor::Allocate(DataType::kFloat32, {});
  EXPECT_FALSE(SameBatchShape(*scalar, *scalar));
}

TEST(TensorBatchTest, SliceRowsAndBounds) {
  Tensor batch = Floats({3, 2}, {1, 2, 3, 4, 5, 6});
  auto mid = SliceRows(batch, 1, 2);
  ASSERT_TRUE(mid.ok());
  EXPECT_EQ(mid->shape(), (runtime::Shape{2, 2}));
  EXPECT_EQ(FloatValues(*mid), (std::vector<float>{3, 4, 5, 6}));
  EXPECT_FALSE(SliceRows(batch, 2, 2).ok());
  EXPECT_FALSE(SliceRows(batch, -1, 1).ok());
}

TEST(TensorBatchTest, StringTensors) {
  auto a = Tensor::Allocate(DataType::kString, {1});
  auto b = Tensor::Allocate(DataType::kString, {1});
  a->strings()[0] = "x";
  b->strings()[0] = "y";
  auto batch = ConcatAndPad({&*a, &*b}, 1);
  ASSERT_TRUE(batch.ok());
  EXPECT_EQ(batch->strings(), (std::vector<std::string>{"x", "y", "x"}));
  auto second = SliceRows(*batch, 1, 1);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->strings(), (std::vector<std::string>{"y"}));
}

}  // namespace
}  // namespace mf::server::batching
