// The decodeattn problem the CPU tests start from (selector and runner tests): bf16, d128, GQA
// 32/8, page 16, 256 pages of 16 keys per sequence (4096 keys), 32 sequences: one split on an
// H200. Addresses are never dereferenced (the selector only inspects them, the fake driver records
// them); `base` places the buffers, each 64 KiB apart.
#pragma once

#include <cstdint>

#include "kiln/runners/decodeattn.h"
#include "support/fake_address.h"

namespace kiln::decodeattn::fixtures {

using fake::fakeAddress;

inline Problem validProblem(std::uintptr_t base = 0) {
  Problem p;
  p.dtype = DType::kBFloat16;
  p.batch = 32;
  p.q_heads = 32;
  p.kv_heads = 8;
  p.head_dim = 128;
  p.page_size = 16;
  p.num_pages = 32 * 256;
  p.max_pages_per_seq = 256;
  p.scale = 0.08838834764831845f;
  p.out = fakeAddress(base + 0x10000);
  p.q = fakeAddress(base + 0x20000);
  p.k_cache = fakeAddress(base + 0x30000);
  p.v_cache = fakeAddress(base + 0x40000);
  p.page_table = fakeAddress<const std::int32_t>(base + 0x50000);
  p.seq_lens = fakeAddress<const std::int32_t>(base + 0x60000);
  return p;
}

}  // namespace kiln::decodeattn::fixtures
