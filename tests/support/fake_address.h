// What the CPU tests of runners hand to a selector or a launch on the fake driver: addresses that
// are never dereferenced (the selector inspects alignment, nullness and byte ranges; the fake
// driver records them), and the bytes of a recorded launch argument read back as the entry's
// parameter struct.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace kiln::fake {

template <typename T = void>
T* fakeAddress(std::uintptr_t a) {
  return reinterpret_cast<T*>(a);
}

// The parameter struct an entry was launched with (fake::Driver::lastLaunchFirstArg(), recorded
// with record_first_arg_bytes = sizeof(Params)).
template <typename Params>
Params paramsOf(const std::vector<unsigned char>& bytes) {
  Params params;
  EXPECT_EQ(bytes.size(), sizeof(params));
  std::memcpy(static_cast<void*>(&params), bytes.data(), sizeof(params));
  return params;
}

}  // namespace kiln::fake
