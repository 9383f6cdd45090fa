#include "runtime/page_allocator.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <string>

#include "model/error.h"

namespace qwen3 {

PageAllocator::PageAllocator(int page_size, int num_pages, int max_seqs, int max_pages_per_seq,
                             std::uint64_t seed)
    : page_size_(page_size),
      num_pages_(num_pages),
      max_seqs_(max_seqs),
      max_pages_per_seq_(max_pages_per_seq),
      shuffled_(static_cast<std::size_t>(num_pages)),
      table_(static_cast<std::size_t>(max_seqs) * static_cast<std::size_t>(max_pages_per_seq)) {
  if (page_size <= 0 || num_pages <= 0 || max_seqs <= 0 || max_pages_per_seq <= 0) {
    throw Error("PageAllocator: page_size " + std::to_string(page_size) + ", num_pages " +
                std::to_string(num_pages) + ", max_seqs " + std::to_string(max_seqs) +
                ", max_pages_per_seq " + std::to_string(max_pages_per_seq) + ": each must be > 0");
  }
  std::iota(shuffled_.begin(), shuffled_.end(), 0);
  std::shuffle(shuffled_.begin(), shuffled_.end(), std::mt19937_64(seed));
  reset(0);
}

void PageAllocator::reset(int count) {
  if (count < 0 || count > max_seqs_) {
    throw Error("PageAllocator: " + std::to_string(count) + " sequences; the cache holds " +
                std::to_string(max_seqs_) + " at most");
  }
  free_.assign(shuffled_.rbegin(), shuffled_.rend());  // back() is shuffled_[0]
  lengths_.assign(static_cast<std::size_t>(count), 0);
  std::fill(table_.begin(), table_.end(), 0);
  ++version_;
}

std::int64_t PageAllocator::append(int seq) {
  int& length = lengths_.at(static_cast<std::size_t>(seq));
  const int page_index = length / page_size_;
  if (length % page_size_ == 0) {
    if (page_index >= max_pages_per_seq_) {
      throw Error("sequence " + std::to_string(seq) + " would pass " +
                  std::to_string(max_pages_per_seq_ * page_size_) +
                  " tokens, the cache's length per sequence (" +
                  std::to_string(max_pages_per_seq_) + " pages of " + std::to_string(page_size_) +
                  ")");
    }
    if (free_.empty()) {
      throw Error("the KV cache has no free page left (" + std::to_string(num_pages_) +
                  " pages of " + std::to_string(page_size_) + " tokens)");
    }
    table_[static_cast<std::size_t>(seq) * static_cast<std::size_t>(max_pages_per_seq_) +
           static_cast<std::size_t>(page_index)] = free_.back();
    free_.pop_back();
    ++version_;
  }
  const std::int32_t page =
      table_[static_cast<std::size_t>(seq) * static_cast<std::size_t>(max_pages_per_seq_) +
             static_cast<std::size_t>(page_index)];
  const std::int64_t slot = static_cast<std::int64_t>(page) * page_size_ + length % page_size_;
  ++length;
  return slot;
}

}  // namespace qwen3
