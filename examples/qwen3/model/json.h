// The JSON reading both of the loader's formats share (config.json, a safetensors header, the
// shard index): a parse that refuses what nlohmann's DOM would silently accept or choke on, and
// the wording of a value in an error. Internal to qwen3_model.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace qwen3::detail {

using Json = nlohmann::json;

// Deeper than any of the three formats nests (a safetensors header is 3 levels, config.json 3).
inline constexpr int kMaxJsonDepth = 16;

// Parses `text` as JSON for the file `source`, or throws qwen3::Error naming it. Refused besides
// invalid JSON: nesting deeper than kMaxJsonDepth (destroying a deep DOM recurses), and a key an
// object repeats (the DOM keeps the last of two, so "head_dim": 96 then 128 would read as 128,
// and two safetensors entries of one name would read as one).
Json parseJson(std::string_view text, std::string_view source);

// The whole of a small file (config.json, the shard index) of at most `limit` bytes, or an Error
// naming the path and the limit.
std::string readTextFile(const std::filesystem::path& path, std::uintmax_t limit);

// A value as it appears in the file, cut to a readable length, for an error message.
std::string show(const Json& value);

// The JSON type of a value for an error message: "a string", "a float", "null", ...
std::string typeOf(const Json& value);

}  // namespace qwen3::detail
