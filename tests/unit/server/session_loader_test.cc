// The real Loader on the committed example model: load + warm-up, batching wrap, and refusal of
// a corrupt file through the manager (which keeps the good version serving).
#include "server/session/session_loader.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <future>

#include "example_models.h"
#include "server/repository/model_manager.h"
#include "temp_repository.h"

namespace mf::server {
namespace {

using testing::kDigitsV2;

runtime::Tensor Images(int64_t rows) {
  auto t = runtime::Tensor::Allocate(runtime::DataType::kFloat32, {rows, 64});
  for (int64_t i = 0; i < t->num_elements(); ++i) t->data<float>()[i] = static_cast<float>(i % 17);
  return std::move(t).value();
}

TEST(SessionLoaderTest, LoadsAndRunsTheExampleModel) {
  SessionLoader loader(runtime::SessionOptions{}, nullptr);
  auto servable = loader.Load("digits", 2, kDigitsV2);
  ASSERT_TRUE(servable.ok()) << servable.status().ToString();
  const auto& sig = (*servable)->signature();
  ASSERT_EQ(sig.inputs.size(), 1u);
  EXPECT_EQ(sig.inputs[0].name, "images");
  EXPECT_EQ(sig.outputs[0].name, "scores");
  runtime::Tensor images = Images(3);
  Servable::Outputs outputs;
  ASSERT_TRUE((*servable)->Run({&images}, &outputs).ok());
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_EQ(outputs[0].shape(), (runtime::Shape{3, 10}));
  EXPECT_GT((*servable)->memory_bytes(), 0u);
}

TEST(SessionLoaderTest, BatchingWrapGivesTheSameNumbers) {
  batching::BatchingOptions options;
  options.num_batch_threads = 1;
  auto scheduler = std::make_shared<batching::BatchScheduler>(options);
  SessionLoader plain(runtime::SessionOptions{}, nullptr);
  SessionLoader batched(runtime::SessionOptions{}, scheduler);
  auto a = plain.Load("digits", 2, kDigitsV2);
  auto b = batched.Load("digits", 2, kDigitsV2);
  ASSERT_TRUE(a.ok() && b.ok());
  runtime::Tensor images = Images(2);
  Servable::Outputs expected, got;
  ASSERT_TRUE((*a)->Run({&images}, &expected).ok());
  ASSERT_TRUE((*b)->Run({&images}, &got).ok());
  ASSERT_EQ(got[0].shape(), expected[0].shape());
  for (int64_t i = 0; i < got[0].num_elements(); ++i) {
    EXPECT_FLOAT_EQ(got[0].data<float>()[i], expected[0].data<float>()[i]);
  }
}

TEST(SessionLoaderTest, CorruptVersionIsRefusedAndTheGoodOneKeepsServing) {
  testing::TempRepository repo;
  std::filesystem::create_directories(repo.base() + "/1");
  std::filesystem::copy_file(kDigitsV2, repo.base() + "/1/model.onnx");
  ManagerOptions options;
  options.retry_initial = std::chrono::milliseconds(10);
  ModelManager manager(std::make_shared<SessionLoader>(runtime::SessionOptions{}, nullptr), options);
  ASSERT_TRUE(manager.SetModels({{"digits", repo.base(), VersionPolicy::Latest(1), {}}}).ok());
  manager.PollOnce();
  manager.PollOnce();
  ASSERT_TRUE(manager.GetServable("digits", VersionRequest::Latest()).ok());

  std::string bytes;
  {
    std::ifstream in(kDigitsV2, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  repo.WriteVersion(2, bytes.substr(0, bytes.size() / 3));  // a truncated copy
  manager.PollOnce();
  manager.PollOnce();
  auto status = manager.GetModelStatus("digits", 2);
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->at(0).state, VersionState::kEnd);
  EXPECT_FALSE(status->at(0).status.ok());
  auto handle = manager.GetServable("digits", VersionRequest::Latest());
  ASSERT_TRUE(handle.ok());
  EXPECT_EQ(handle->version, 1);
}

}  // namespace
}  // namespace mf::server
