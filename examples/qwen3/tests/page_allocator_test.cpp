// The KV cache's page allocator: slots follow the page table, pages are scattered and never
// shared, and running out of pages or of a sequence's page-table row is refused with the limit.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "model/error.h"
#include "runtime/page_allocator.h"

namespace qwen3 {
namespace {

TEST(PageAllocator, SlotsFollowThePageTable) {
  PageAllocator pages(/*page_size=*/16, /*num_pages=*/12, /*max_seqs=*/3,
                      /*max_pages_per_seq=*/4, /*seed=*/5);
  pages.reset(3);
  std::set<std::int64_t> used;
  for (int token = 0; token < 40; ++token) {
    for (int seq = 0; seq < 3; ++seq) {
      const std::int64_t slot = pages.append(seq);
      const std::int32_t page = pages.pageTable()[static_cast<std::size_t>(seq * 4 + token / 16)];
      EXPECT_EQ(slot, page * 16 + token % 16) << "seq " << seq << " token " << token;
      EXPECT_TRUE(used.insert(slot).second) << "slot " << slot << " handed out twice";
    }
  }
  EXPECT_EQ(pages.length(1), 40);
  EXPECT_EQ(pages.freePages(), 12 - 3 * 3);
}

TEST(PageAllocator, PagesAreScatteredAndResetFreesThem) {
  PageAllocator pages(16, 64, 1, 64, /*seed=*/1);
  pages.reset(1);
  for (int token = 0; token < 64 * 16; ++token) pages.append(0);
  int in_order = 0;
  for (int i = 1; i < 64; ++i) in_order += pages.pageTable()[i] == pages.pageTable()[i - 1] + 1;
  EXPECT_LT(in_order, 16) << "the free list should not hand out consecutive pages";
  EXPECT_EQ(pages.freePages(), 0);
  const std::uint64_t version = pages.pageTableVersion();
  pages.reset(1);
  EXPECT_EQ(pages.freePages(), 64);
  EXPECT_EQ(pages.length(0), 0);
  EXPECT_GT(pages.pageTableVersion(), version);
}

TEST(PageAllocator, VersionMovesOnlyWhenAPageIsTaken) {
  PageAllocator pages(16, 8, 2, 4, 3);
  pages.reset(2);
  const std::uint64_t start = pages.pageTableVersion();
  pages.append(0);  // takes a page
  EXPECT_EQ(pages.pageTableVersion(), start + 1);
  for (int i = 1; i < 16; ++i) pages.append(0);  // the rest of it
  EXPECT_EQ(pages.pageTableVersion(), start + 1);
  pages.append(0);  // the next page
  EXPECT_EQ(pages.pageTableVersion(), start + 2);
}

TEST(PageAllocator, RefusesPastTheLimits) {
  PageAllocator pages(16, 3, 2, 2, 0);
  pages.reset(2);
  for (int i = 0; i < 32; ++i) pages.append(0);
  try {
    pages.append(0);
    FAIL() << "a 33rd token fits no page-table row of 2 pages";
  } catch (const Error& e) {
    EXPECT_STREQ(
        e.what(),
        "sequence 0 would pass 32 tokens, the cache's length per sequence (2 pages of 16)");
  }
  for (int i = 0; i < 16; ++i) pages.append(1);
  try {
    pages.append(1);
    FAIL() << "the cache has 3 pages";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "the KV cache has no free page left (3 pages of 16 tokens)");
  }
  EXPECT_THROW(pages.reset(3), Error);
  EXPECT_THROW(PageAllocator(0, 1, 1, 1, 0), Error);
}

}  // namespace
}  // namespace qwen3
