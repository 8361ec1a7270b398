// The routing decisions, measured over many simulated requests: weights hold within ±2 %, sticky
// keys stay put across a weight change except the moved share, header routes win, a version
// without ready endpoints has its share spread over the others, endpoints by least outstanding.
#include "server/router/routing.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

namespace mf::router {
namespace {

RouterConfig Config(std::vector<std::pair<std::string, int>> weights) {
  RouterConfig config;
  config.model = "m";
  for (auto& [name, weight] : weights) config.versions.push_back({.name = name, .weight = weight});
  return config;
}

HeaderLookup Headers(std::map<std::string, std::string> headers) {
  return [headers = std::move(headers)](std::string_view name) -> std::optional<std::string_view> {
    auto it = headers.find(std::string(name));
    if (it == headers.end()) return std::nullopt;
    return std::string_view(it->second);
  };
}

// Fraction of `n` weighted picks per version.
std::vector<double> Shares(const RouterConfig& config, std::vector<int> ready, int n = 100'000) {
  std::mt19937_64 rng(42);
  std::vector<double> counts(config.versions.size(), 0);
  HeaderLookup none = Headers({});
  for (int i = 0; i < n; ++i) {
    VersionPick pick = PickVersion(config, ready, none, rng(), rng());
    EXPECT_EQ(pick.reason, PickReason::kWeighted);
    if (pick.version >= 0) counts[pick.version] += 1;
  }
  for (double& c : counts) c /= n;
  return counts;
}

TEST(RoutingTest, WeightsHoldWithinTwoPercent) {
  struct Case {
    std::vector<std::pair<std::string, int>> weights;
  };
  for (const Case& c :
       {Case{{{"v1", 90}, {"v2", 10}}}, Case{{{"v1", 70}, {"v2", 30}}}, Case{{{"a", 50}, {"b", 25}, {"c", 25}}},
        Case{{{"a", 1}, {"b", 99}}}, Case{{{"a", 0}, {"b", 100}}}, Case{{{"a", 33}, {"b", 33}, {"c", 34}}}}) {
    RouterConfig config = Config(c.weights);
    std::vector<double> shares = Shares(config, std::vector<int>(config.versions.size(), 2));
    for (size_t i = 0; i < shares.size(); ++i) {
      EXPECT_NEAR(shares[i], config.versions[i].weight / 100.0, 0.02) << config.versions[i].name;
    }
  }
  // A zero weight gets nothing at all.
  EXPECT_EQ(Shares(Config({{"a", 0}, {"b", 100}}), {1, 1})[0], 0.0);
}

TEST(RoutingTest, UnreadyVersionsShareIsSpreadProportionally) {
  struct Case {
    std::vector<std::pair<std::string, int>> weights;
    std::vector<int> ready;
    std::vector<double> expected;
  };
  for (const Case& c : {
           Case{{{"v1", 90}, {"v2", 10}}, {0, 3}, {0.0, 1.0}},
           Case{{{"v1", 90}, {"v2", 10}}, {3, 0}, {1.0, 0.0}},
           Case{{{"a", 50}, {"b", 30}, {"c", 20}}, {1, 0, 1}, {50.0 / 70, 0.0, 20.0 / 70}},
           Case{{{"a", 50}, {"b", 30}, {"c", 20}}, {0, 1, 1}, {0.0, 0.6, 0.4}},
           // The only ready version has weight 0: it serves (evenly among ready) rather than 503.
           Case{{{"a", 100}, {"b", 0}}, {0, 1}, {0.0, 1.0}},
           Case{{{"a", 100}, {"b", 0}, {"c", 0}}, {0, 1, 1}, {0.0, 0.5, 0.5}},
       }) {
    RouterConfig config = Config(c.weights);
    std::vector<double> shares = Shares(config, c.ready);
    for (size_t i = 0; i < shares.size(); ++i) EXPECT_NEAR(shares[i], c.expected[i], 0.02) << i;
  }
}

TEST(RoutingTest, NothingReadyPicksNothing) {
  RouterConfig config = Config({{"v1", 90}, {"v2", 10}});
  VersionPick pick = PickVersion(config, std::vector<int>{0, 0}, Headers({}), 1, 2);
  EXPECT_EQ(pick.version, -1);
  EXPECT_EQ(NoReadyEndpointMessage(config, std::vector<int>{0, 0}, std::vector<int>{2, 0}),
            "no ready endpoint for model m (versions: v1 0/2 ready, v2 0/0 ready)");
}

TEST(RoutingTest, HeaderRoutesWinFirstMatchFirst) {
  RouterConfig config = Config({{"v1", 100}, {"v2", 0}, {"v3", 0}});
  config.routes = {{"x-experiment", "b", "v2"}, {"x-experiment", "c", "v3"}, {"x-tier", "gold", "v3"}};
  config.sticky = {StickyBy::Source::kHeader, "x-user-id"};
  std::vector<int> ready{1, 1, 1};
  struct Case {
    std::map<std::string, std::string> headers;
    int version;
    PickReason reason;
  };
  for (const Case& c :
       {Case{{{"x-experiment", "b"}}, 1, PickReason::kRoute}, Case{{{"x-experiment", "c"}}, 2, PickReason::kRoute},
        Case{{{"x-experiment", "c"}, {"x-tier", "gold"}}, 2, PickReason::kRoute},
        Case{{{"x-experiment", "B"}}, 0, PickReason::kWeighted},  // values are exact
        Case{{{"x-tier", "gold"}, {"x-user-id", "u1"}}, 2, PickReason::kRoute},
        Case{{{"x-user-id", "u1"}}, 0, PickReason::kSticky}, Case{{}, 0, PickReason::kWeighted}}) {
    VersionPick pick = PickVersion(config, ready, Headers(c.headers), 7, 9);
    EXPECT_EQ(pick.version, c.version);
    EXPECT_EQ(pick.reason, c.reason);
  }
  // A route to a version with nothing ready is not silently served by another version.
  VersionPick pick = PickVersion(config, std::vector<int>{1, 0, 1}, Headers({{"x-experiment", "b"}}), 7, 9);
  EXPECT_EQ(pick.version, -1);
  EXPECT_EQ(pick.reason, PickReason::kRoute);
}

std::vector<int> StickyAssignments(const RouterConfig& config, std::vector<int> ready, int users) {
  std::vector<int> out;
  std::mt19937_64 rng(1);
  for (int u = 0; u < users; ++u) {
    std::string id = "user-" + std::to_string(u);
    VersionPick pick = PickVersion(config, ready, Headers({{"x-user-id", id}}), rng(), rng());
    EXPECT_EQ(pick.reason, PickReason::kSticky);
    out.push_back(pick.version);
  }
  return out;
}

TEST(RoutingTest, StickyKeysStayAndAWeightChangeMovesOnlyTheMovedShare) {
  constexpr int kUsers = 100'000;
  RouterConfig before = Config({{"v1", 90}, {"v2", 10}});
  before.sticky = {StickyBy::Source::kHeader, "x-user-id"};
  std::vector<int> a = StickyAssignments(before, {2, 2}, kUsers);
  // Stable: the same key always lands on the same version.
  EXPECT_EQ(a, StickyAssignments(before, {2, 2}, kUsers));
  // And the split still follows the weights.
  double v2 = std::count(a.begin(), a.end(), 1) / static_cast<double>(kUsers);
  EXPECT_NEAR(v2, 0.10, 0.02);

  RouterConfig after = before;
  after.versions[0].weight = 80;
  after.versions[1].weight = 20;
  std::vector<int> b = StickyAssignments(after, {2, 2}, kUsers);
  int moved = 0, moved_back = 0;
  for (int u = 0; u < kUsers; ++u) {
    if (a[u] != b[u]) ++moved;
    if (a[u] == 1 && b[u] == 0) ++moved_back;  // a v2 user sent back to v1: never
  }
  EXPECT_NEAR(moved / static_cast<double>(kUsers), 0.10, 0.01);
  EXPECT_EQ(moved_back, 0);
}

TEST(RoutingTest, StickyUsersOfAHealthyVersionStayWhenAnotherLosesItsEndpoints) {
  RouterConfig config = Config({{"a", 50}, {"b", 30}, {"c", 20}});
  config.sticky = {StickyBy::Source::kHeader, "x-user-id"};
  std::vector<int> all = StickyAssignments(config, {1, 1, 1}, 20'000);
  std::vector<int> without_b = StickyAssignments(config, {1, 0, 1}, 20'000);
  for (size_t u = 0; u < all.size(); ++u) {
    if (all[u] != 1) {
      EXPECT_EQ(without_b[u], all[u]) << u;
    } else {
      EXPECT_NE(without_b[u], 1) << u;
    }
  }
}

TEST(RoutingTest, StickyByCookie) {
  RouterConfig config = Config({{"v1", 50}, {"v2", 50}});
  config.sticky = {StickyBy::Source::kCookie, "session"};
  std::vector<int> ready{1, 1};
  VersionPick first = PickVersion(config, ready, Headers({{"cookie", "theme=dark; session=abc123"}}), 1, 2);
  EXPECT_EQ(first.reason, PickReason::kSticky);
  for (uint64_t r = 0; r < 50; ++r) {
    VersionPick again = PickVersion(config, ready, Headers({{"cookie", "session=abc123;theme=light"}}), r, r * 7);
    EXPECT_EQ(again.version, first.version);
  }
  EXPECT_EQ(PickVersion(config, ready, Headers({{"cookie", "theme=dark"}}), 1, 2).reason, PickReason::kWeighted);
}

TEST(RoutingTest, FindCookie) {
  EXPECT_EQ(FindCookie("a=1; b=2", "b"), "2");
  EXPECT_EQ(FindCookie("a=1;b=2", "a"), "1");
  EXPECT_EQ(FindCookie("ab=1; b=\"q\"", "b"), "q");
  EXPECT_EQ(FindCookie("ab=1", "b"), std::nullopt);
  EXPECT_EQ(FindCookie("", "b"), std::nullopt);
  EXPECT_EQ(FindCookie("b", "b"), std::nullopt);
  EXPECT_EQ(FindCookie("b=", "b"), "");
}

TEST(RoutingTest, StableHashIsFixed) {
  // Every replica and every build must agree: pinned values (a change would move every user).
  EXPECT_EQ(StableHash("user-1"), 0x5fb2a196c40e4f99ULL);
  EXPECT_EQ(StableHash("user-1", 1), 0xff9c331001816cebULL);
  EXPECT_NE(StableHash("user-1"), StableHash("user-2"));
  EXPECT_NE(StableHash("user-1", 0), StableHash("user-1", 1));
}

TEST(RoutingTest, PickEndpointPrefersFewerOutstandingAndSkipsUnavailable) {
  std::mt19937_64 rng(3);
  std::vector<EndpointLoad> loads{{10, true}, {0, true}, {5, false}, {3, true}};
  std::map<int, int> counts;
  for (int i = 0; i < 30'000; ++i) ++counts[PickEndpoint(loads, rng())];
  EXPECT_EQ(counts.count(2), 0u);  // unavailable: never
  // Two distinct choices among 3: the busiest (10) only wins when drawn with... never: it always
  // loses its pair. The idlest always wins its pair (chosen in 2/3 of draws).
  EXPECT_EQ(counts.count(0), 0u);
  EXPECT_NEAR(counts[1] / 30'000.0, 2.0 / 3, 0.02);
  EXPECT_NEAR(counts[3] / 30'000.0, 1.0 / 3, 0.02);

  EXPECT_EQ(PickEndpoint(std::vector<EndpointLoad>{{7, true}}, 123), 0);
  EXPECT_EQ(PickEndpoint(std::vector<EndpointLoad>{{7, false}}, 123), -1);
  EXPECT_EQ(PickEndpoint(std::vector<EndpointLoad>{}, 123), -1);
  // Equal loads spread evenly.
  std::vector<EndpointLoad> even(4, {0, true});
  std::map<int, int> spread;
  for (int i = 0; i < 40'000; ++i) ++spread[PickEndpoint(even, rng())];
  for (int e = 0; e < 4; ++e) EXPECT_NEAR(spread[e] / 40'000.0, 0.25, 0.02);
}

}  // namespace
}  // namespace mf::router
