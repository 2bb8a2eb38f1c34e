#include "engine/page_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "base/error.h"
#include "engine/prefix_cache.h"

namespace fission::engine {
namespace {

TEST(PagePoolTest, AllocatesAllOrNothingAndFreesOnLastUnref) {
  PagePool pool(4);
  std::vector<std::int32_t> a, b;
  EXPECT_TRUE(pool.Allocate(3, &a));
  EXPECT_EQ(pool.num_free(), 1);
  EXPECT_FALSE(pool.Allocate(2, &b));
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(pool.num_free(), 1);
  EXPECT_EQ(std::set<std::int32_t>(a.begin(), a.end()).size(), 3u);
  pool.Ref(a[0]);
  EXPECT_EQ(pool.ref_count(a[0]), 2);
  pool.Unref(a[0]);
  EXPECT_EQ(pool.num_free(), 1);
  pool.Unref(a[0]);
  EXPECT_EQ(pool.num_free(), 2);
  EXPECT_TRUE(pool.Allocate(2, &b));
  EXPECT_EQ(pool.num_free(), 0);
  EXPECT_TRUE(pool.Allocate(0, &b));
}

TEST(PrefixCacheTest, MatchesWholePagesOnly) {
  PagePool pool(16);
  PrefixCache cache(&pool, 4);
  std::vector<std::int32_t> tokens = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  std::vector<std::int32_t> pages;
  ASSERT_TRUE(pool.Allocate(3, &pages));
  cache.Insert(cache.root(), tokens.data(), pages, 0, 2);
  EXPECT_EQ(cache.num_pages(), 2);
  EXPECT_EQ(pool.ref_count(pages[0]), 2);
  EXPECT_EQ(cache.MatchPrefix(tokens.data(), 10).pages, (std::vector<std::int32_t>{pages[0], pages[1]}));
  EXPECT_EQ(cache.MatchPrefix(tokens.data(), 7).pages, (std::vector<std::int32_t>{pages[0]}));
  std::vector<std::int32_t> other = {1, 2, 3, 4, 5, 6, 7, 0};
  EXPECT_EQ(cache.MatchPrefix(other.data(), 8).pages.size(), 1u);
  other[0] = 9;
  EXPECT_TRUE(cache.MatchPrefix(other.data(), 8).pages.empty());
  for (std::int32_t p : pages) pool.Unref(p);
  EXPECT_EQ(pool.num_free(), 16 - 2);
}

TEST(PrefixCacheTest, DuplicateInsertSwitchesToTheCachedPage) {
  PagePool pool(8);
  PrefixCache cache(&pool, 2);
  std::vector<std::int32_t> tokens = {1, 2, 3, 4};
  std::vector<std::int32_t> a, b;
  ASSERT_TRUE(pool.Allocate(2, &a));
  ASSERT_TRUE(pool.Allocate(2, &b));
  cache.Insert(cache.root(), tokens.data(), a, 0, 2);
  const std::vector<std::int32_t> b_before = b;
  cache.Insert(cache.root(), tokens.data(), b, 0, 2);
  EXPECT_EQ(b, a);  // b now uses the cached pages
  EXPECT_EQ(pool.ref_count(b_before[0]), 0);
  EXPECT_EQ(pool.ref_count(a[0]), 3);
  EXPECT_EQ(cache.num_pages(), 2);
}

TEST(PrefixCacheTest, EvictsLeastRecentlyUsedUnlockedLeavesFirst) {
  PagePool pool(8);
  PrefixCache cache(&pool, 1);
  // Two branches: [1,2,3] and [1,5]; a sequence still holds [1,5].
  std::vector<std::int32_t> t1 = {1, 2, 3}, t2 = {1, 5};
  std::vector<std::int32_t> p1, p2;
  ASSERT_TRUE(pool.Allocate(3, &p1));
  cache.Insert(cache.root(), t1.data(), p1, 0, 3);
  for (std::int32_t p : p1) pool.Unref(p);  // the first sequence finished
  auto m = cache.MatchPrefix(t2.data(), 1);
  for (std::int32_t p : m.pages) pool.Ref(p);
  p2 = m.pages;
  ASSERT_TRUE(pool.Allocate(1, &p2));
  cache.Insert(m.last, t2.data(), p2, 1, 2);
  EXPECT_EQ(cache.num_pages(), 4);
  EXPECT_EQ(cache.CountEvictable(), 2);  // pages of 2 and 3
  EXPECT_EQ(cache.Evict(1), 1);          // the leaf 3 goes first
  EXPECT_EQ(cache.MatchPrefix(t1.data(), 3).pages.size(), 2u);
  EXPECT_EQ(cache.Evict(10), 1);  // then 2; 1 and 5 are held by the sequence
  EXPECT_EQ(cache.num_pages(), 2);
  for (std::int32_t p : p2) pool.Unref(p);
  EXPECT_EQ(cache.Evict(10), 2);
  EXPECT_EQ(pool.num_free(), 8);
}

TEST(PrefixCacheTest, LruOrderFollowsUse) {
  PagePool pool(8);
  PrefixCache cache(&pool, 1);
  std::vector<std::int32_t> a = {1}, b = {2};
  std::vector<std::int32_t> pa, pb;
  ASSERT_TRUE(pool.Allocate(1, &pa));
  ASSERT_TRUE(pool.Allocate(1, &pb));
  cache.Insert(cache.root(), a.data(), pa, 0, 1);
  cache.Insert(cache.root(), b.data(), pb, 0, 1);
  pool.Unref(pa[0]);
  pool.Unref(pb[0]);
  cache.MatchPrefix(a.data(), 1);  // a is now the most recently used
  EXPECT_EQ(cache.Evict(1), 1);
  EXPECT_EQ(cache.MatchPrefix(a.data(), 1).pages.size(), 1u);
  EXPECT_TRUE(cache.MatchPrefix(b.data(), 1).pages.empty());
}

}  // namespace
}  // namespace fission::engine
