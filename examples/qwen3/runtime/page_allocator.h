// The host half of the paged KV cache: which page of the cache each sequence's tokens live in.
// Pages are handed out as sequences grow (a token that starts a page takes one from the free list)
// and the page table, [max_seqs, max_pages_per_seq] int32, is what decodeattn, fmha's paged path
// and qkrope's slot mapping read. The free list starts shuffled (from a seed), so a sequence's
// pages are scattered through the cache, as they are in a server that has been running a while:
// the kernels must follow the page table, not assume contiguity.
//
// No CUDA here: the decoder uploads pageTable() when pageTableVersion() moves. Tested on the CPU.
#pragma once

#include <cstdint>
#include <vector>

namespace qwen3 {

class PageAllocator {
 public:
  PageAllocator(int page_size, int num_pages, int max_seqs, int max_pages_per_seq,
                std::uint64_t seed);

  // Frees every page and starts `count` empty sequences (count <= max_seqs).
  void reset(int count);
  // Appends one token to sequence `seq` and returns its cache slot, page * page_size + offset (the
  // slot_mapping qkrope writes K and V at). Throws Error naming the limit when the sequence would
  // pass max_pages_per_seq pages or the cache has no free page.
  std::int64_t append(int seq);

  int length(int seq) const { return lengths_.at(static_cast<std::size_t>(seq)); }
  int sequences() const { return static_cast<int>(lengths_.size()); }
  int pageSize() const { return page_size_; }
  int numPages() const { return num_pages_; }
  int maxPagesPerSeq() const { return max_pages_per_seq_; }
  int freePages() const { return static_cast<int>(free_.size()); }
  // [max_seqs, max_pages_per_seq]; rows of sequences not started and entries past a sequence's
  // pages are 0 (a valid page id: the kernels never read past seq_lens).
  const std::vector<std::int32_t>& pageTable() const { return table_; }
  // Incremented whenever pageTable() changes.
  std::uint64_t pageTableVersion() const { return version_; }

 private:
  int page_size_, num_pages_, max_seqs_, max_pages_per_seq_;
  std::vector<std::int32_t> shuffled_;  // every page id, in the order reset() hands them out
  std::vector<std::int32_t> free_;      // a stack: back() is next
  std::vector<int> lengths_;
  std::vector<std::int32_t> table_;
  std::uint64_t version_ = 0;
};

}  // namespace qwen3
