// Parses and validates kernels/<group>/kiln.toml (docs/registry.md) into Groups and Variants.
//
// Every rule fails with "<file>:<line>: <rule broken>", pointing at the offending key or value,
// because a registry error is read by a kernel author at a terminal. Families are expanded here,
// so everything downstream sees plain variants with every constant set and typed.
#include "core/registry.h"

#include "core/naming.h"
#include "io/fs.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <sys/stat.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <regex>
#include <set>
#include <system_error>
#include <unordered_map>

namespace kiln::core {
namespace {

namespace fs = std::filesystem;

const std::set<std::string> kTopLevelKeys = {"group", "constants", "variant", "family"};
const std::set<std::string> kGroupKeys = {
    "name",          "kind",          "description", "source", "entries",
    "supported_sms", "arch_specific", "sm_constant", "uses",   "nvcc_flags"};
// Keys a [[variant]] or [[family]] may set; the last five override the group's.
const std::set<std::string> kVariantKeys = {
    "name", "constants", "source", "entries", "supported_sms", "arch_specific", "nvcc_flags"};
const std::set<std::string> kFamilyKeys = {"name",          "matrix",    "constants",
                                           "source",        "entries",   "supported_sms",
                                           "arch_specific", "nvcc_flags"};
const std::set<std::string> kDtypes = {"fp16", "bf16", "fp32"};
const std::set<std::string> kUses = {"cutlass"};

bool isIdentifier(const std::string& s, bool allow_upper) {
  static const std::regex lower("[a-z][a-z0-9_]*");
  static const std::regex any("[A-Za-z_][A-Za-z0-9_]*");
  return std::regex_match(s, allow_upper ? any : lower);
}

Error usageError(const std::string& message) {
  return makeError(escapeControl(message), ErrorKind::kUsage);
}

const char* fileTypeName(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// Reads a kiln.toml through io::readRegularFileOr (opened without blocking, so a FIFO cannot hang
// the open; fstat must show a regular file; at most kMaxRegistryFileBytes read), wording each
// refusal for a kiln.toml.
Result<std::string> readRegistryFile(const fs::path& path, const std::string& display) {
  using Reason = io::FileRefusal::Reason;
  std::string text;
  io::FileRefusal r;
  if (io::readRegularFileOr(path, kMaxRegistryFileBytes, io::Links::kFollow, &text, &r))
    return text;
  switch (r.reason) {
    case Reason::kOpen:
    case Reason::kSymlink:
      if (r.error == ENOENT) return usageError(fmt::format("{}: no such registry file", display));
      return usageError(fmt::format("{}: cannot open: {}", display, std::strerror(r.error)));
    case Reason::kStat:
      return usageError(fmt::format("{}: cannot stat: {}", display, std::strerror(r.error)));
    case Reason::kNotRegular:
      return usageError(fmt::format("{}: is {}; a kiln.toml must be a regular file", display,
                                    fileTypeName(static_cast<mode_t>(r.mode))));
    case Reason::kTooBig:
    case Reason::kGrew:
      return usageError(
          fmt::format("{}: is {} bytes; the limit for a kiln.toml is {} bytes (1 MiB)", display,
                      r.size, kMaxRegistryFileBytes));
    case Reason::kRead:
      return usageError(fmt::format("{}: cannot read: {}", display, std::strerror(r.error)));
  }
  return usageError(fmt::format("{}: cannot read", display));
}

// The code point of the control character at text[i] (C0, DEL, or C1 as UTF-8 C2 80..9F) and
// its length in bytes; 0 when text[i] starts none.
std::size_t controlAt(std::string_view text, std::size_t i, unsigned& code) {
  const auto c = static_cast<unsigned char>(text[i]);
  if (c < 0x20 || c == 0x7f) {
    code = c;
    return 1;
  }
  if (c == 0xc2 && i + 1 < text.size()) {
    const auto d = static_cast<unsigned char>(text[i + 1]);
    if (d >= 0x80 && d <= 0x9f) {
      code = d;
      return 2;
    }
  }
  return 0;
}

// Is `child` (canonical) inside `dir` (canonical), or `dir` itself?
bool isInside(const fs::path& child, const fs::path& dir) {
  auto c = child.begin();
  for (auto d = dir.begin(); d != dir.end(); ++d, ++c) {
    if (d->empty() && std::next(d) == dir.end()) break;  // a trailing separator
    if (c == child.end() || *c != *d) return false;
  }
  return true;
}

// Carries the file name so every error can be located.
class Parser {
 public:
  Parser(fs::path toml_path, std::string display, std::string text,
         const std::vector<int>& nvcc_sms)
      : path_(std::move(toml_path)),
        display_(std::move(display)),
        text_(std::move(text)),
        nvcc_sms_(nvcc_sms) {}

  Result<Group> parse() {
    toml::table root;
    try {
      root = toml::parse(std::string_view(text_), std::string_view(display_));
    } catch (const toml::parse_error& e) {
      return fail(static_cast<int>(e.source().begin.line),
                  fmt::format("invalid TOML: {}", e.description()));
    }
    // Before any value is used: every key and string is short and free of control characters.
    if (!checkText(root)) return error();
    if (!check(root, kTopLevelKeys, "the top level")) return error();

    Group group;
    std::error_code ec;
    group.toml = fs::absolute(path_, ec);
    if (ec) return fail(1, fmt::format("cannot resolve the path: {}", ec.message()));
    group.dir = group.toml.parent_path();
    const toml::table* g = root["group"].as_table();
    if (!g) return fail(1, "missing [group] table");
    if (!parseGroupTable(*g, group)) return error();

    if (const toml::node* c = root.get("constants")) {
      const toml::table* t = c->as_table();
      if (!t) return fail(line(*c), "[constants] must be a table of name = \"type\"");
      if (t->size() > kMaxConstantsPerGroup)
        return fail(line(*c), fmt::format("[constants] declares {} constants; the limit is {}",
                                          t->size(), kMaxConstantsPerGroup));
      for (const auto& [key, value] : *t) {
        std::string name(key.str());
        if (!isIdentifier(name, false))
          return fail(line(value),
                      fmt::format("constant name '{}' must match [a-z][a-z0-9_]*", name));
        const auto* type = value.as_string();
        if (!type)
          return fail(line(value), fmt::format("constant '{}': type must be a string", name));
        auto parsed = parseType(type->get());
        if (!parsed)
          return fail(line(value), fmt::format("constant '{}': unknown type '{}' (expected int, "
                                               "bool, dtype or enum)",
                                               name, type->get()));
        group.constants.push_back({name, *parsed});
      }
      // toml++ tables iterate in key order; keep the declaration order by source position.
      std::sort(
          group.constants.begin(), group.constants.end(),
          [&](const ConstantDecl& a, const ConstantDecl& b) {
            return line(*t->get(a.name)) < line(*t->get(b.name)) ||
                   (line(*t->get(a.name)) == line(*t->get(b.name)) &&
                    t->get(a.name)->source().begin.column < t->get(b.name)->source().begin.column);
          });
      for (std::size_t k = 0; k < group.constants.size(); ++k)
        decl_index_.emplace(group.constants[k].name, k);
    }

    if (!parseVariants(root, group)) return error();
    if (group.variants.empty()) return fail(1, "the group declares no [[variant]] or [[family]]");
    return group;
  }

 private:
  static int line(const toml::node& n) { return static_cast<int>(n.source().begin.line); }

  Error error() const { return makeError(error_, ErrorKind::kUsage); }
  // Messages quote values from the file: control characters in them are escaped.
  Error fail(int at, const std::string& rule) {
    error_ = escapeControl(fmt::format("{}:{}: {}", display_, at, rule));
    return makeError(error_, ErrorKind::kUsage);
  }

  // One key or string: at most `limit` bytes, no control character (docs/registry.md, "Limits").
  bool checkString(std::string_view text, const char* what, std::size_t limit, int at) {
    if (text.size() > limit) {
      return failed(at, fmt::format("{} \"{}...\" is {} bytes long; the limit is {}", what,
                                    text.substr(0, 32), text.size(), limit));
    }
    for (std::size_t i = 0; i < text.size(); ++i) {
      unsigned code = 0;
      if (controlAt(text, i, code)) {
        return failed(at, fmt::format("{} \"{}\" contains the control character U+{:04X}; "
                                      "kiln.toml keys and strings may not contain control "
                                      "characters (U+0000-U+001F, U+007F-U+009F)",
                                      what, text, code));
      }
    }
    return true;
  }

  bool checkText(const toml::node& n) {
    if (const toml::table* t = n.as_table()) {
      for (const auto& [key, value] : *t) {
        const int at =
            key.source().begin.line ? static_cast<int>(key.source().begin.line) : line(value);
        if (!checkString(key.str(), "the key", kMaxKeyBytes, at)) return false;
        if (!checkText(value)) return false;
      }
    } else if (const toml::array* a = n.as_array()) {
      for (const auto& e : *a)
        if (!checkText(e)) return false;
    } else if (const auto* s = n.as_string()) {
      return checkString(s->get(), "the string", kMaxStringBytes, line(n));
    }
    return true;
  }
  bool failed(int at, const std::string& rule) {
    (void)fail(at, rule);
    return false;
  }

  bool check(const toml::table& t, const std::set<std::string>& allowed, const std::string& where) {
    for (const auto& [key, value] : t) {
      if (!allowed.count(std::string(key.str()))) {
        return failed(line(value), fmt::format("unknown key '{}' in {} (allowed: {})", key.str(),
                                               where, fmt::join(allowed, ", ")));
      }
    }
    return true;
  }

  static std::optional<ConstantType> parseType(const std::string& s) {
    if (s == "int") return ConstantType::kInt;
    if (s == "bool") return ConstantType::kBool;
    if (s == "dtype") return ConstantType::kDtype;
    if (s == "enum") return ConstantType::kEnum;
    return std::nullopt;
  }

  bool getString(const toml::table& t, const char* key, std::string& out, bool required,
                 int table_line) {
    const toml::node* n = t.get(key);
    if (!n)
      return required ? failed(table_line, fmt::format("missing required key '{}'", key)) : true;
    const auto* s = n->as_string();
    if (!s) return failed(line(*n), fmt::format("'{}' must be a string", key));
    out = s->get();
    return true;
  }

  bool getBool(const toml::table& t, const char* key, bool& out) {
    const toml::node* n = t.get(key);
    if (!n) return true;
    const auto* b = n->as_boolean();
    if (!b) return failed(line(*n), fmt::format("'{}' must be true or false", key));
    out = b->get();
    return true;
  }

  bool getStrings(const toml::table& t, const char* key, std::vector<std::string>& out) {
    const toml::node* n = t.get(key);
    if (!n) return true;
    const auto* a = n->as_array();
    if (!a) return failed(line(*n), fmt::format("'{}' must be an array of strings", key));
    if (a->size() > kMaxListItems)
      return failed(line(*n), fmt::format("'{}' has {} items; the limit is {}", key, a->size(),
                                          kMaxListItems));
    out.clear();
    for (const auto& e : *a) {
      const auto* s = e.as_string();
      if (!s) return failed(line(e), fmt::format("'{}' must be an array of strings", key));
      out.push_back(s->get());
    }
    return true;
  }

  bool getSms(const toml::table& t, std::vector<int>& out, const std::vector<int>* allowed) {
    const toml::node* n = t.get("supported_sms");
    if (!n) return true;
    const auto* a = n->as_array();
    if (!a || a->empty())
      return failed(line(*n), "'supported_sms' must be a non-empty array of SM numbers (90)");
    if (a->size() > kMaxListItems)
      return failed(line(*n), fmt::format("'supported_sms' has {} items; the limit is {}",
                                          a->size(), kMaxListItems));
    out.clear();
    for (const auto& e : *a) {
      const auto* i = e.as_integer();
      if (!i)
        return failed(line(e), fmt::format("'supported_sms' entry {} is not an SM number: SMs are "
                                           "integers from {} to {} such as 80, 90, 100, 120",
                                           describe(e), kMinSm, kMaxSm));
      const std::int64_t raw = i->get();
      if (raw < kMinSm || raw > kMaxSm)
        return failed(line(e), fmt::format("'supported_sms' entry {} is out of range: SMs are "
                                           "integers from {} to {} such as 80, 90, 100, 120",
                                           raw, kMinSm, kMaxSm));
      const int sm = static_cast<int>(raw);
      if (!nvcc_sms_.empty() &&
          std::find(nvcc_sms_.begin(), nvcc_sms_.end(), sm) == nvcc_sms_.end()) {
        return failed(line(e), fmt::format("sm_{} is not supported by the installed nvcc "
                                           "(it targets sm_{})",
                                           sm, fmt::join(nvcc_sms_, ", sm_")));
      }
      if (allowed && std::find(allowed->begin(), allowed->end(), sm) == allowed->end()) {
        return failed(line(e), fmt::format("sm_{} is not in the group's supported_sms ({})", sm,
                                           fmt::join(*allowed, ", ")));
      }
      if (std::find(out.begin(), out.end(), sm) != out.end())
        return failed(line(e), fmt::format("sm_{} is listed twice", sm));
      out.push_back(sm);
    }
    std::sort(out.begin(), out.end());
    return true;
  }

  bool checkEntries(const toml::table& t, const std::vector<std::string>& entries, int at) {
    if (entries.empty()) return failed(at, "'entries' must name at least one entry kernel");
    for (const auto& e : entries) {
      const toml::node* n = t.get("entries");
      if (!isIdentifier(e, true))
        return failed(n ? line(*n) : at, fmt::format("entry '{}' is not a C identifier", e));
      if (e.size() > kMaxIdentifierBytes)
        return failed(n ? line(*n) : at, fmt::format("entry '{}' is {} bytes long; the limit is {}",
                                                     e, e.size(), kMaxIdentifierBytes));
    }
    return true;
  }

  // A source lies in the group directory: relative, no '..', and no symlink on the way that
  // leads out of it; it must be a regular file (docs/registry.md, "Paths").
  bool checkSource(const toml::table& t, const fs::path& dir, const std::string& source, int at) {
    const toml::node* n = t.get("source");
    const int where = n ? line(*n) : at;
    const fs::path rel(source);
    if (source.empty()) return failed(where, "'source' must not be empty");
    if (rel.has_root_path())
      return failed(where, fmt::format("source '{}' is an absolute path; sources are relative "
                                       "to the group directory and lie inside it",
                                       source));
    for (const auto& part : rel) {
      if (part == "..")
        return failed(where, fmt::format("source '{}' contains '..'; sources lie inside the group "
                                         "directory",
                                         source));
    }
    const fs::path p = dir / rel;
    std::error_code ec;
    const fs::path real = fs::canonical(p, ec);
    if (ec)
      return failed(where, fmt::format("source '{}' does not exist ({}: {})", source, p.string(),
                                       ec.message()));
    const fs::path real_dir = fs::canonical(dir, ec);
    if (ec)
      return failed(where, fmt::format("cannot resolve the group directory {}: {}", dir.string(),
                                       ec.message()));
    if (!isInside(real, real_dir))
      return failed(where, fmt::format("source '{}' resolves to {}, outside the group directory "
                                       "{} (through a symlink); sources lie inside it",
                                       source, real.string(), real_dir.string()));
    const auto st = fs::status(real, ec);
    if (ec || !fs::is_regular_file(st))
      return failed(where,
                    fmt::format("source '{}' is not a regular file ({})", source, real.string()));
    return true;
  }

  bool parseGroupTable(const toml::table& g, Group& group) {
    const int at = line(g);
    if (!check(g, kGroupKeys, "[group]")) return false;
    if (!getString(g, "name", group.name, true, at)) return false;
    if (std::string rule = checkGroupName(group.name); !rule.empty())
      return failed(line(*g.get("name")), fmt::format("group name '{}' {}", group.name, rule));
    if (group.name != group.dir.filename().string())
      return failed(line(*g.get("name")),
                    fmt::format("group name '{}' must equal its directory name '{}'", group.name,
                                group.dir.filename().string()));
    std::string kind;
    if (!getString(g, "kind", kind, true, at)) return false;
    if (kind == "cuda") {
      group.kind = SourceKind::kCuda;
    } else if (kind == "cute_dsl") {
      group.kind = SourceKind::kCuteDsl;
    } else {
      return failed(line(*g.get("kind")),
                    fmt::format("unknown kind '{}' (expected cuda or cute_dsl)", kind));
    }
    if (!getString(g, "description", group.description, false, at)) return false;
    if (!getString(g, "source", defaults_.source, true, at)) return false;
    if (!checkSource(g, group.dir, defaults_.source, at)) return false;
    if (!getStrings(g, "entries", defaults_.entries)) return false;
    if (!checkEntries(g, defaults_.entries, at)) return false;
    if (!g.get("supported_sms")) return failed(at, "missing required key 'supported_sms'");
    if (!getSms(g, group.supported_sms, nullptr)) return false;
    if (!getBool(g, "arch_specific", defaults_.arch_specific)) return false;
    if (!getBool(g, "sm_constant", defaults_.sm_constant)) return false;
    if (!getStrings(g, "uses", defaults_.uses)) return false;
    for (const auto& u : defaults_.uses) {
      if (!kUses.count(u))
        return failed(line(*g.get("uses")), fmt::format("unknown 'uses' entry '{}' (known: {})", u,
                                                        fmt::join(kUses, ", ")));
    }
    if (!getStrings(g, "nvcc_flags", defaults_.nvcc_flags)) return false;
    defaults_.supported_sms = group.supported_sms;
    return true;
  }

  // The settings a [[variant]] or [[family]] starts from and may override.
  struct Defaults {
    std::string source;
    std::vector<std::string> entries;
    std::vector<int> supported_sms;
    bool arch_specific = false;
    bool sm_constant = false;
    std::vector<std::string> uses;
    std::vector<std::string> nvcc_flags;
  };

  bool applyOverrides(const toml::table& t, const Group& group, Variant& v) {
    const int at = line(t);
    std::string source = defaults_.source;
    if (!getString(t, "source", source, false, at)) return false;
    if (!checkSource(t, group.dir, source, at)) return false;
    v.source = group.dir / source;
    v.entries = defaults_.entries;
    if (!getStrings(t, "entries", v.entries)) return false;
    if (!checkEntries(t, v.entries, at)) return false;
    v.supported_sms = defaults_.supported_sms;
    if (!getSms(t, v.supported_sms, &group.supported_sms)) return false;
    v.arch_specific = defaults_.arch_specific;
    if (!getBool(t, "arch_specific", v.arch_specific)) return false;
    v.nvcc_flags = defaults_.nvcc_flags;
    if (!getStrings(t, "nvcc_flags", v.nvcc_flags)) return false;
    v.sm_constant = defaults_.sm_constant;
    v.uses = defaults_.uses;
    v.group = group.name;
    v.kind = group.kind;
    v.line = at;
    return true;
  }

  // Converts a TOML value to a constant of the declared type, or fails naming both.
  bool toConstant(const ConstantDecl& decl, const toml::node& n, Constant& out) {
    out.name = decl.name;
    out.type = decl.type;
    auto wrong = [&](const char* expected) {
      return failed(line(n), fmt::format("constant '{}' is declared {} but the value is {}",
                                         decl.name, expected, describe(n)));
    };
    switch (decl.type) {
      case ConstantType::kInt:
        if (const auto* i = n.as_integer()) {
          const std::int64_t value = i->get();
          if (value < kMinIntConstant || value > kMaxIntConstant)
            return failed(line(n), fmt::format("constant '{}' = {} is out of range: int constants "
                                               "are baked as C++ int ({} to {})",
                                               decl.name, value, kMinIntConstant, kMaxIntConstant));
          out.value = value;
          return true;
        }
        return wrong("int");
      case ConstantType::kBool:
        if (const auto* b = n.as_boolean()) {
          out.value = b->get();
          return true;
        }
        return wrong("bool");
      case ConstantType::kDtype:
        if (const auto* s = n.as_string()) {
          if (!kDtypes.count(s->get()))
            return failed(line(n), fmt::format("constant '{}': unknown dtype '{}' (known: {})",
                                               decl.name, s->get(), fmt::join(kDtypes, ", ")));
          out.value = s->get();
          return true;
        }
        return wrong("dtype");
      case ConstantType::kEnum:
        if (const auto* s = n.as_string()) {
          if (!isIdentifier(s->get(), false))
            return failed(line(n), fmt::format("constant '{}': enum value '{}' must match "
                                               "[a-z][a-z0-9_]*",
                                               decl.name, s->get()));
          if (s->get().size() > kMaxIdentifierBytes)
            return failed(line(n),
                          fmt::format("constant '{}': enum value '{}' is {} bytes long; "
                                      "the limit is {}",
                                      decl.name, s->get(), s->get().size(), kMaxIdentifierBytes));
          out.value = s->get();
          return true;
        }
        return wrong("enum");
    }
    return false;
  }

  static std::string describe(const toml::node& n) {
    if (n.is_integer()) return fmt::format("the integer {}", n.as_integer()->get());
    if (n.is_boolean()) return n.as_boolean()->get() ? "true" : "false";
    if (n.is_string()) return fmt::format("the string \"{}\"", n.as_string()->get());
    if (n.is_floating_point()) return fmt::format("the float {}", n.as_floating_point()->get());
    if (n.is_array()) return "an array";
    if (n.is_table()) return "a table";
    return "of another type";
  }

  const ConstantDecl* findDecl(const Group& group, const std::string& name) {
    const auto it = decl_index_.find(name);
    return it == decl_index_.end() ? nullptr : &group.constants[it->second];
  }

  // Collects `constants = {...}` of a variant or family into `out`.
  bool fixedConstants(const toml::table& t, const Group& group, std::vector<Constant>& out) {
    const toml::node* n = t.get("constants");
    if (!n) return true;
    const toml::table* c = n->as_table();
    if (!c) return failed(line(*n), "'constants' must be a table { name = value, ... }");
    for (const auto& [key, value] : *c) {
      const ConstantDecl* decl = findDecl(group, std::string(key.str()));
      if (!decl)
        return failed(line(value),
                      fmt::format("constant '{}' is not declared in [constants]", key.str()));
      Constant k;
      if (!toConstant(*decl, value, k)) return false;
      out.push_back(std::move(k));
    }
    return true;
  }

  static std::string valueText(const ConstantValue& v) {
    if (const auto* i = std::get_if<std::int64_t>(&v)) return std::to_string(*i);
    if (const auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
    return std::get<std::string>(v);
  }

  // Orders constants as declared and checks every declared constant is set exactly once.
  // Linear in the constants, and the duplicate check is a hash look-up: a family of thousands of
  // variants costs thousands of steps, not their square.
  bool finish(const Group& group, std::vector<Constant> given, Variant& v, int at) {
    v.constants.clear();
    std::vector<std::size_t> counts(group.constants.size(), 0);
    std::vector<std::size_t> first(group.constants.size(), 0);
    for (std::size_t i = 0; i < given.size(); ++i) {
      const auto it = decl_index_.find(given[i].name);
      if (it == decl_index_.end()) continue;  // not reached: every given constant was declared
      if (counts[it->second]++ == 0) first[it->second] = i;
    }
    for (std::size_t k = 0; k < group.constants.size(); ++k) {
      const ConstantDecl& decl = group.constants[k];
      const std::size_t count = counts[k];
      if (count == 1) v.constants.push_back(std::move(given[first[k]]));
      if (count == 0)
        return failed(at,
                      fmt::format("variant '{}' does not set constant '{}'", v.name, decl.name));
      if (count > 1)
        return failed(
            at, fmt::format("variant '{}' sets constant '{}' more than once", v.name, decl.name));
    }
    std::string rule = checkVariantName(v.name, group.name);
    if (!rule.empty()) return failed(at, fmt::format("variant name '{}': {}", v.name, rule));
    if (const auto [it, added] = names_.emplace(v.name, at); !added)
      return failed(at, fmt::format("duplicate variant name '{}' (first declared at line {})",
                                    v.name, it->second));
    return true;
  }

  bool belowVariantLimit(const Group& group, int at) {
    if (group.variants.size() < kMaxVariantsPerGroup) return true;
    return failed(at, fmt::format("this [[variant]] would be variant {}; the limit for a "
                                  "kiln.toml is {} variants",
                                  group.variants.size() + 1, kMaxVariantsPerGroup));
  }

  bool parseVariants(const toml::table& root, Group& group) {
    if (const toml::node* n = root.get("variant")) {
      const toml::array* arr = n->as_array();
      if (!arr) return failed(line(*n), "'variant' must be an array of tables ([[variant]])");
      for (const auto& e : *arr) {
        const toml::table* t = e.as_table();
        if (!t) return failed(line(e), "'variant' must be an array of tables ([[variant]])");
        if (!check(*t, kVariantKeys, "[[variant]]")) return false;
        if (!belowVariantLimit(group, line(*t))) return false;
        Variant v;
        if (!getString(*t, "name", v.name, true, line(*t))) return false;
        if (!applyOverrides(*t, group, v)) return false;
        std::vector<Constant> given;
        if (!fixedConstants(*t, group, given)) return false;
        if (!finish(group, std::move(given), v, line(*t))) return false;
        group.variants.push_back(std::move(v));
      }
    }
    if (const toml::node* n = root.get("family")) {
      const toml::array* arr = n->as_array();
      if (!arr) return failed(line(*n), "'family' must be an array of tables ([[family]])");
      for (const auto& e : *arr) {
        const toml::table* t = e.as_table();
        if (!t) return failed(line(e), "'family' must be an array of tables ([[family]])");
        if (!parseFamily(*t, group)) return false;
      }
    }
    return true;
  }

  bool parseFamily(const toml::table& t, Group& group) {
    const int at = line(t);
    if (!check(t, kFamilyKeys, "[[family]]")) return false;
    std::string pattern;
    if (!getString(t, "name", pattern, true, at)) return false;
    Variant base;
    if (!applyOverrides(t, group, base)) return false;
    std::vector<Constant> fixed;
    if (!fixedConstants(t, group, fixed)) return false;

    const toml::node* m = t.get("matrix");
    if (!m) return failed(at, "[[family]] needs a 'matrix' table { constant = [values] }");
    const toml::table* matrix = m->as_table();
    if (!matrix || matrix->empty())
      return failed(line(*m), "'matrix' must be a non-empty table { constant = [values] }");

    // Each matrix axis: a declared constant and its values, converted and typed.
    std::vector<std::vector<Constant>> axes;
    for (const auto& [key, value] : *matrix) {
      std::string name(key.str());
      const ConstantDecl* decl = findDecl(group, name);
      if (!decl)
        return failed(line(value),
                      fmt::format("matrix key '{}' is not declared in [constants]", name));
      const toml::array* values = value.as_array();
      if (!values || values->empty())
        return failed(line(value), fmt::format("matrix '{}' must be a non-empty array", name));
      if (pattern.find("{" + name + "}") == std::string::npos)
        return failed(line(*t.get("name")),
                      fmt::format("family name '{}' must contain {{{}}}: every matrix key "
                                  "distinguishes its variants",
                                  pattern, name));
      std::vector<Constant> axis;
      for (const auto& v : *values) {
        Constant c;
        if (!toConstant(*decl, v, c)) return false;
        axis.push_back(std::move(c));
      }
      axes.push_back(std::move(axis));
    }
    // The size of the product, refused before it is expanded (saturating: it may not fit 64 bits).
    std::uint64_t count = 1;
    bool overflow = false;
    std::vector<std::string> sizes;
    for (const auto& axis : axes) {
      sizes.push_back(std::to_string(axis.size()));
      overflow = overflow || __builtin_mul_overflow(count, axis.size(), &count);
    }
    const std::uint64_t before = group.variants.size();
    if (overflow || count > kMaxVariantsPerGroup - before) {
      return failed(
          at,
          fmt::format("[[family]] '{}' expands to {} variants (matrix {}){}; the limit "
                      "for a kiln.toml is {} variants",
                      pattern, overflow ? "more than 2^64" : std::to_string(count),
                      fmt::join(sizes, " x "),
                      before ? fmt::format(", after {} declared before it", before) : std::string(),
                      kMaxVariantsPerGroup));
    }

    // Cartesian product over the axes (in key order): `index` counts like an
    // odometer whose last digit turns fastest.
    std::vector<std::size_t> index(axes.size(), 0);
    for (bool more = true; more;) {
      Variant v = base;
      std::vector<Constant> given = fixed;
      for (std::size_t a = 0; a < axes.size(); ++a) given.push_back(axes[a][index[a]]);
      v.name = pattern;
      for (const auto& c : given) {
        const std::string placeholder = "{" + c.name + "}";
        for (std::size_t p; (p = v.name.find(placeholder)) != std::string::npos;)
          v.name.replace(p, placeholder.size(), valueText(c.value));
      }
      if (v.name.find('{') != std::string::npos)
        return failed(line(*t.get("name")),
                      fmt::format("family name '{}' has a placeholder that is not a constant of "
                                  "the family",
                                  pattern));
      if (!finish(group, std::move(given), v, at)) return false;
      group.variants.push_back(std::move(v));
      more = false;
      for (std::size_t a = axes.size(); a-- > 0;) {
        if (++index[a] < axes[a].size()) {
          more = true;
          break;
        }
        index[a] = 0;
      }
    }
    return true;
  }

  fs::path path_;
  std::string display_;
  std::string text_;
  const std::vector<int>& nvcc_sms_;
  Defaults defaults_;
  std::string error_;
  std::unordered_map<std::string, std::size_t> decl_index_;  // constant name -> its index
  std::unordered_map<std::string, int> names_;               // variant name -> its line
};

}  // namespace

Result<Group> parseGroup(const fs::path& toml_path, const std::vector<int>& nvcc_sms) {
  // Errors name the file as kernels/<group>/kiln.toml when it sits in a kiln tree.
  std::string display = toml_path.string();
  const fs::path group_dir = toml_path.parent_path();
  if (group_dir.parent_path().filename() == "kernels")
    display = (fs::path("kernels") / group_dir.filename() / toml_path.filename()).string();
  auto text = readRegistryFile(toml_path, display);
  if (!text) return text.failure();
  return Parser(toml_path, display, std::move(text).value(), nvcc_sms).parse();
}

// Every std::filesystem call here takes an error_code: an unreadable directory is a registry
// error naming it, never an exception.
Result<Registry> loadRegistry(const fs::path& root, const std::vector<int>& nvcc_sms) {
  Registry registry;
  std::error_code ec;
  registry.root = fs::absolute(root, ec);
  if (ec)
    return usageError(fmt::format("{}: cannot resolve the path: {}", root.string(), ec.message()));
  const fs::path kernels = registry.root / "kernels";
  const fs::file_status kernels_status = fs::status(kernels, ec);
  if (kernels_status.type() == fs::file_type::not_found ||
      (!ec && !fs::is_directory(kernels_status)))
    return usageError(fmt::format("{}: no kernels/ directory (is --root the kiln repository?)",
                                  registry.root.string()));
  if (ec) return usageError(fmt::format("{}: cannot read: {}", kernels.string(), ec.message()));
  std::vector<fs::path> tomls;
  fs::directory_iterator it(kernels, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const fs::path dir = it->path();
    const fs::file_status dir_status = it->status(ec);
    if (dir_status.type() == fs::file_type::not_found) {  // a dangling symlink: not a group
      ec.clear();
      continue;
    }
    if (ec) return usageError(fmt::format("{}: cannot read: {}", dir.string(), ec.message()));
    if (!fs::is_directory(dir_status)) continue;
    const fs::path toml = dir / "kiln.toml";
    // Anything named kiln.toml (a FIFO, a device, a dangling link) is a group whose file
    // parseGroup refuses; only a directory without one is not a group (kernels/common).
    const fs::file_status toml_status = fs::symlink_status(toml, ec);
    if (toml_status.type() == fs::file_type::not_found) {
      ec.clear();
      continue;
    }
    if (ec)
      return usageError(fmt::format("kernels/{}/kiln.toml: cannot read: {}",
                                    dir.filename().string(), ec.message()));
    tomls.push_back(toml);
  }
  if (ec)
    return usageError(
        fmt::format("{}: cannot read the registry directory: {}", kernels.string(), ec.message()));
  std::sort(tomls.begin(), tomls.end());
  std::unordered_map<std::string, std::string> owners;  // variant name -> group
  std::size_t total = 0;
  for (const auto& t : tomls) {
    auto group = parseGroup(t, nvcc_sms);
    if (!group) return group.failure();
    total += group->variants.size();
    if (total > kMaxVariantsPerRegistry)
      return usageError(
          fmt::format("kernels/{}/kiln.toml: the registry has {} variants with this "
                      "group; the limit for all groups together is {}",
                      group->name, total, kMaxVariantsPerRegistry));
    for (const auto& v : group->variants) {
      if (const auto [owner, added] = owners.emplace(v.name, v.group); !added) {
        return usageError(
            fmt::format("kernels/{}/kiln.toml:{}: variant name '{}' is already used "
                        "by group '{}'; names are unique across groups",
                        v.group, v.line, v.name, owner->second));
      }
    }
    registry.groups.push_back(std::move(group).value());
  }
  return registry;
}

const Group* Registry::findGroup(const std::string& name) const {
  for (const auto& g : groups)
    if (g.name == name) return &g;
  return nullptr;
}

const Variant* Registry::findVariant(const std::string& name) const {
  for (const auto& g : groups)
    for (const auto& v : g.variants)
      if (v.name == name) return &v;
  return nullptr;
}

std::string escapeControl(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    unsigned code = 0;
    const std::size_t n = controlAt(text, i, code);
    if (n == 0) {
      out += text[i++];
      continue;
    }
    out += n == 1 ? fmt::format("\\x{:02x}", code) : fmt::format("\\u{:04x}", code);
    i += n;
  }
  return out;
}

const char* constantTypeName(ConstantType type) {
  switch (type) {
    case ConstantType::kInt:
      return "int";
    case ConstantType::kBool:
      return "bool";
    case ConstantType::kDtype:
      return "dtype";
    case ConstantType::kEnum:
      return "enum";
  }
  return "?";
}

const char* sourceKindName(SourceKind kind) {
  return kind == SourceKind::kCuda ? "cuda" : "cute_dsl";
}

const char* dtypeCxxType(const std::string& dtype) {
  if (dtype == "fp16") return "__half";
  if (dtype == "bf16") return "__nv_bfloat16";
  if (dtype == "fp32") return "float";
  return nullptr;
}

}  // namespace kiln::core
