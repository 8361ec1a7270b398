#include "k8s/store.h"

#include <gtest/gtest.h>

namespace mf::k8s {
namespace {

ObjectPtr Obj(const std::string& ns, const std::string& name, const std::string& owner) {
  return std::make_shared<const nlohmann::json>(
      nlohmann::json{{"metadata", {{"name", name}, {"namespace", ns}, {"ownerReferences", {{{"uid", owner}}}}}}});
}

TEST(StoreTest, CustomIndexIsMaintainedOnReplaceAndErase) {
  Store store;
  ASSERT_TRUE(store.AddIndex("owner", [](const nlohmann::json& o) {
    std::vector<std::string> out;
    for (const auto& ref : o["metadata"]["ownerReferences"]) out.push_back(ref["uid"]);
    return out;
  }));
  EXPECT_FALSE(store.AddIndex("owner", {}));  // name taken
  store.Upsert("ml/a", Obj("ml", "a", "u1"));
  store.Upsert("ml/b", Obj("ml", "b", "u1"));
  store.Upsert("x/c", Obj("x", "c", "u2"));
  EXPECT_FALSE(store.AddIndex("late", {}));  // after objects exist
  EXPECT_EQ(store.ByIndex("owner", "u1").size(), 2u);
  EXPECT_EQ(store.ByIndex("namespace", "x").size(), 1u);

  ObjectPtr previous = store.Upsert("ml/a", Obj("ml", "a", "u2"));
  ASSERT_TRUE(previous);
  EXPECT_EQ(store.ByIndex("owner", "u1").size(), 1u);
  EXPECT_EQ(store.ByIndex("owner", "u2").size(), 2u);

  EXPECT_TRUE(store.Erase("ml/b"));
  EXPECT_FALSE(store.Erase("ml/b"));
  EXPECT_TRUE(store.ByIndex("owner", "u1").empty());
  EXPECT_TRUE(store.ByIndex("unknown-index", "u1").empty());
  EXPECT_EQ(store.Keys(), (std::vector<std::string>{"ml/a", "x/c"}));
  EXPECT_EQ(store.Size(), 2u);
}

}  // namespace
}  // namespace mf::k8s

namespace mf::k8s {
namespace {

TEST(StoreTest, ThrowingIndexFunctionChangesNothing) {
  Store store;
  ASSERT_TRUE(store.AddIndex("owner", [](const nlohmann::json& o) {
    return std::vector<std::string>{o.at("metadata").at("ownerReferences").at(0).at("uid").get<std::string>()};
  }));
  store.Upsert("ml/a", Obj("ml", "a", "u1"));
  auto broken = std::make_shared<const nlohmann::json>(nlohmann::json{{"metadata", {{"name", "a"}}}});
  EXPECT_ANY_THROW(store.Upsert("ml/a", broken));
  EXPECT_EQ((*store.Get("ml/a"))["metadata"]["ownerReferences"][0]["uid"], "u1");
  EXPECT_EQ(store.ByIndex("owner", "u1").size(), 1u);
  EXPECT_EQ(store.ByIndex("namespace", "ml").size(), 1u);
}

}  // namespace
}  // namespace mf::k8s
