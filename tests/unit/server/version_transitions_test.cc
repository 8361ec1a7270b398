#include "server/repository/version_transitions.h"

#include <gtest/gtest.h>

namespace mf::server {
namespace {

using K = Transition::Kind;
using S = VersionState;

VersionView Start(bool allowed = true) { return {S::kStart, allowed, false}; }
VersionView Available() { return {S::kAvailable, false, false}; }
VersionView Failed(bool retry_due) { return {S::kEnd, retry_due, false}; }
VersionView Unloading(bool released) { return {S::kUnloading, false, released}; }

struct Case {
  const char* name;
  SwapMode mode;
  std::set<int64_t> aspired;
  std::map<int64_t, VersionView> versions;
  std::optional<Transition> want;
};

constexpr SwapMode kAvail = SwapMode::kAvailabilityPreserving;
constexpr SwapMode kResource = SwapMode::kResourcePreserving;

TEST(NextTransitionTest, Table) {
  const Case cases[] = {
      {"first version loads", kAvail, {1}, {{1, Start()}}, Transition{K::kLoad, 1}},
      {"incomplete file waits", kAvail, {1}, {{1, Start(false)}}, std::nullopt},
      {"new version loads before old unloads", kAvail, {2}, {{1, Available()}, {2, Start()}}, Transition{K::kLoad, 2}},
      {"old unloads once new is available",
       kAvail,
       {2},
       {{1, Available()}, {2, Available()}},
       Transition{K::kUnload, 1}},
      {"failed new version keeps old serving", kAvail, {2}, {{1, Available()}, {2, Failed(false)}}, std::nullopt},
      {"failed version retried after backoff",
       kAvail,
       {2},
       {{1, Available()}, {2, Failed(true)}},
       Transition{K::kLoad, 2}},
      {"rollback loads the older version first",
       kAvail,
       {1},
       {{1, Start()}, {2, Available()}},
       Transition{K::kLoad, 1}},
      {"nothing aspired keeps what serves", kAvail, {}, {{1, Available()}}, std::nullopt},
      {"highest version loads first",
       kAvail,
       {1, 2, 3},
       {{1, Start()}, {2, Start()}, {3, Start()}},
       Transition{K::kLoad, 3}},
      {"all loaded: nothing to do", kAvail, {1, 2}, {{1, Available()}, {2, Available()}}, std::nullopt},
      {"resource preserving unloads first",
       kResource,
       {2},
       {{1, Available()}, {2, Start()}},
       Transition{K::kUnload, 1}},
      {"resource preserving waits for release", kResource, {2}, {{1, Unloading(false)}, {2, Start()}}, std::nullopt},
      {"resource preserving loads after release",
       kResource,
       {2},
       {{1, Unloading(true)}, {2, Start()}},
       Transition{K::kLoad, 2}},
      {"availability preserving ignores pending release",
       kAvail,
       {2},
       {{1, Unloading(false)}, {2, Start()}},
       Transition{K::kLoad, 2}},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(NextTransition(c.aspired, c.versions, c.mode), c.want) << c.name;
  }
}

}  // namespace
}  // namespace mf::server
