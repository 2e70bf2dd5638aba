#include "core/memory_storage.h"

#include <gtest/gtest.h>

namespace mesh::core {
namespace {

TEST(MemoryStorage, PutGetOverwrite) {
  MemoryStorage storage;
  EXPECT_FALSE(storage.get("auth/boot"));
  EXPECT_TRUE(storage.put("auth/boot", "1"));
  ASSERT_TRUE(storage.get("auth/boot"));
  EXPECT_EQ(*storage.get("auth/boot"), "1");
  EXPECT_TRUE(storage.put("auth/boot", "2"));
  EXPECT_EQ(*storage.get("auth/boot"), "2");
  EXPECT_EQ(storage.writes(), 2u);
}

TEST(MemoryStorage, StoresBinaryValues) {
  MemoryStorage storage;
  const std::string value("a\0b", 3);
  EXPECT_TRUE(storage.put("k", value));
  EXPECT_EQ(*storage.get("k"), value);
}

TEST(MemoryStorage, Remove) {
  MemoryStorage storage;
  storage.put("a", "1");
  EXPECT_TRUE(storage.remove("a"));
  EXPECT_FALSE(storage.get("a"));
  // Removing what is not there is not an I/O error.
  EXPECT_TRUE(storage.remove("a"));
}

TEST(MemoryStorage, KeysWithPrefixSorted) {
  MemoryStorage storage;
  for (const char* key : {"kgroup/b/log", "kgroup/a/log", "auth/boot", "kgroup/a/meta", "kgroupx", "kgroup"}) {
    storage.put(key, "v");
  }
  EXPECT_EQ(storage.keys("kgroup/"), (std::vector<std::string>{"kgroup/a/log", "kgroup/a/meta", "kgroup/b/log"}));
  EXPECT_EQ(storage.keys("kgroup"),
            (std::vector<std::string>{"kgroup", "kgroup/a/log", "kgroup/a/meta", "kgroup/b/log", "kgroupx"}));
  EXPECT_EQ(storage.keys(""), (std::vector<std::string>{"auth/boot", "kgroup", "kgroup/a/log", "kgroup/a/meta",
                                                        "kgroup/b/log", "kgroupx"}));
  EXPECT_TRUE(storage.keys("zzz").empty());
}

}  // namespace
}  // namespace mesh::core
