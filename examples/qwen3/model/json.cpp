#include "model/json.h"

#include <fstream>
#include <iterator>
#include <set>
#include <vector>

#include "model/error.h"

namespace qwen3::detail {

namespace {

// Thrown from the parser callback to stop at the first refusal; parseJson words it.
struct Refusal {
  std::string message;
};

}  // namespace

Json parseJson(std::string_view text, std::string_view source) {
  // The keys seen so far in each open object; arrays push nothing (a key event is in an object).
  std::vector<std::set<std::string>> keys;
  const auto check = [&](int depth, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        // depth counts the containers around this one: the top level is 0.
        if (depth >= kMaxJsonDepth) {
          throw Refusal{"nests more than " + std::to_string(kMaxJsonDepth) + " levels deep"};
        }
        if (event == Json::parse_event_t::object_start) keys.emplace_back();
        break;
      case Json::parse_event_t::object_end:
        keys.pop_back();
        break;
      case Json::parse_event_t::key:
        if (!keys.back().insert(parsed.get<std::string>()).second) {
          throw Refusal{"repeats the key " + parsed.dump() + " in one object"};
        }
        break;
      default:
        break;
    }
    return true;
  };
  try {
    return Json::parse(text.begin(), text.end(), check);
  } catch (const Refusal& r) {
    throw Error(std::string(source) + ": " + r.message);
  } catch (const Json::exception& e) {
    throw Error(std::string(source) + ": not valid JSON: " + e.what());
  }
}

std::string readTextFile(const std::filesystem::path& path, std::uintmax_t limit) {
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) throw Error(path.string() + ": cannot read: " + ec.message());
  if (size > limit) {
    throw Error(path.string() + ": " + std::to_string(size) + " bytes, more than the limit of " +
                std::to_string(limit));
  }
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw Error(path.string() + ": cannot read");
  return text;
}

std::string show(const Json& value) {
  constexpr std::size_t kMax = 60;
  std::string text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (text.size() > kMax) text = text.substr(0, kMax) + "...";
  return text;
}

std::string typeOf(const Json& value) {
  if (value.is_number_float()) return "a float";
  if (value.is_number()) return "an integer";
  if (value.is_null()) return "null";
  const std::string name = value.type_name();
  return (name == "array" || name == "object" ? "an " : "a ") + name;
}

}  // namespace qwen3::detail
