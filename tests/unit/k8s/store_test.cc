#include "k8s/store.h"

#include <gtest/gtest.h>

namespace mf::k8s {
namespace {

nlohmann::json Obj(const std::string& ns, const std::string& name, const std::string& owner) {
  return nlohmann::json{{"metadata", {{"name", name}, {"namespace", ns}, {"ownerReferences", {{{"uid", owner}}}}}}};
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

  EXPECT_TRUE(store.Upsert("ml/a", Obj("ml", "a", "u2")));
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
  const nlohmann::json broken{{"metadata", {{"name", "a"}}}};
  EXPECT_ANY_THROW(store.Upsert("ml/a", broken));
  EXPECT_EQ((*store.Get("ml/a"))["metadata"]["ownerReferences"][0]["uid"], "u1");
  EXPECT_EQ(store.ByIndex("owner", "u1").size(), 1u);
  EXPECT_EQ(store.ByIndex("namespace", "ml").size(), 1u);
}

}  // namespace
}  // namespace mf::k8s

namespace mf::k8s {
namespace {

// The store keeps objects packed: what a reader gets back must be the object as stored, every
// JSON type intact, and each reader's copy its own.
TEST(StoreTest, ObjectsComeBackExactlyAsStored) {
  const nlohmann::json object = {{"metadata", {{"name", "a"}, {"namespace", "ml"}, {"resourceVersion", "42"}}},
                                 {"spec",
                                  {{"replicas", 3},
                                   {"big", 18446744073709551615ull},
                                   {"negative", -7},
                                   {"ratio", 0.25},
                                   {"on", true},
                                   {"none", nullptr},
                                   {"text", "grüße \u2713"},
                                   {"list", {1, "two", {{"three", 3}}}},
                                   {"empty", nlohmann::json::object()}}}};
  Store store;
  EXPECT_FALSE(store.Upsert("ml/a", object));
  ObjectPtr first = store.Get("ml/a");
  ObjectPtr second = store.Get("ml/a");
  ASSERT_TRUE(first && second);
  EXPECT_EQ(*first, object);
  EXPECT_EQ(first->dump(), object.dump());
  EXPECT_NE(first.get(), second.get());
  EXPECT_EQ(store.List().size(), 1u);
  EXPECT_EQ(*store.List().front(), object);
  EXPECT_EQ(*store.ByIndex("namespace", "ml").front(), object);
  ObjectPtr erased = store.Erase("ml/a");
  ASSERT_TRUE(erased);
  EXPECT_EQ(*erased, object);
  EXPECT_FALSE(store.Get("ml/a"));
  EXPECT_TRUE(store.ByIndex("namespace", "ml").empty());
}

}  // namespace
}  // namespace mf::k8s
