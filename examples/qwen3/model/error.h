// The one exception the loader throws: every refusal of a file is an Error whose message names the
// file, the key or tensor, the value and what was expected. Loading happens once, before anything
// is launched, so a caller catches it at the top and prints what().
#pragma once

#include <stdexcept>

namespace qwen3 {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace qwen3
