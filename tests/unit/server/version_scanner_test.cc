#include "server/repository/version_scanner.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "temp_repository.h"

namespace mf::server {
namespace {

TEST(VersionScannerTest, MissingBasePathIsAnErrorNotAnEmptyList) {
  testing::TempRepository repo;
  VersionScanner scanner(repo.base() + "/nope");
  auto scanned = scanner.Scan();
  ASSERT_FALSE(scanned.ok());
  EXPECT_EQ(scanned.status().code(), StatusCode::kNotFound);
  EXPECT_NE(scanned.status().message().find("nope"), std::string::npos);
}

TEST(VersionScannerTest, ListsNumericVersionsWithAModelFile) {
  testing::TempRepository repo;
  repo.WriteVersion(1, "one");
  repo.WriteVersion(12, "twelve");
  std::filesystem::create_directories(std::filesystem::path(repo.base()) / "3");  // no model yet
  std::filesystem::create_directories(std::filesystem::path(repo.base()) / "tmp");
  std::filesystem::create_directories(std::filesystem::path(repo.base()) / "4.partial");
  VersionScanner scanner(repo.base());
  auto scanned = scanner.Scan();
  ASSERT_TRUE(scanned.ok()) << scanned.status().ToString();
  ASSERT_EQ(scanned->size(), 2u);
  EXPECT_EQ(scanned->at(1).model_path, repo.base() + "/1/model.onnx");
  EXPECT_EQ(scanned->at(12).fingerprint.size, 6u);
}

TEST(VersionScannerTest, StableOnlyWhenUnchangedAcrossTwoScans) {
  testing::TempRepository repo;
  repo.WriteVersion(1, "abc");
  VersionScanner scanner(repo.base());
  EXPECT_FALSE(scanner.Scan()->at(1).stable);
  EXPECT_TRUE(scanner.Scan()->at(1).stable);
  repo.WriteVersion(1, "abcdef");  // still being written
  EXPECT_FALSE(scanner.Scan()->at(1).stable);
  EXPECT_TRUE(scanner.Scan()->at(1).stable);
}

TEST(VersionScannerTest, ScansCloseTogetherWaitForTheMinimumStableAge) {
  testing::TempRepository repo;
  repo.WriteVersion(1, "abc");
  VersionScanner scanner(repo.base(), std::chrono::milliseconds(150));
  EXPECT_FALSE(scanner.Scan()->at(1).stable);
  EXPECT_FALSE(scanner.Scan()->at(1).stable) << "unchanged, but only for a moment";
  std::this_thread::sleep_for(std::chrono::milliseconds(160));
  EXPECT_TRUE(scanner.Scan()->at(1).stable);
  repo.WriteVersion(1, "abcdef");  // written again: the age starts over
  EXPECT_FALSE(scanner.Scan()->at(1).stable);
  std::this_thread::sleep_for(std::chrono::milliseconds(160));
  EXPECT_TRUE(scanner.Scan()->at(1).stable);
}

TEST(VersionScannerTest, GlitchKeepsStabilityHistory) {
  testing::TempRepository repo;
  repo.WriteVersion(1, "abc");
  VersionScanner scanner(repo.base());
  ASSERT_TRUE(scanner.Scan().ok());
  auto moved = repo.root() / "moved";
  std::filesystem::rename(repo.base(), moved);
  EXPECT_FALSE(scanner.Scan().ok());
  std::filesystem::rename(moved, repo.base());
  EXPECT_TRUE(scanner.Scan()->at(1).stable);
}

}  // namespace
}  // namespace mf::server
