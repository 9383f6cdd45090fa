// Parses and validates kernels/<group>/kiln.toml (docs/registry.md) into Groups and Variants.
//
// Every rule fails with "<file>:<line>: <rule broken>", pointing at the offending key or value,
// because a registry error is read by a kernel author at a terminal. Families are expanded here,
// so everything downstream sees plain variants with every constant set and typed.
#include "core/registry.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <toml++/toml.h>
#include <algorithm>
#include <functional>
#include <regex>
#include <set>

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

// Carries the file name so every error can be located.
class Parser {
 public:
  Parser(fs::path toml_path, std::string display, const std::vector<int>& nvcc_sms)
      : path_(std::move(toml_path)), display_(std::move(display)), nvcc_sms_(nvcc_sms) {}

  Result<Group> parse() {
    toml::table root;
    try {
      root = toml::parse_file(path_.string());
    } catch (const toml::parse_error& e) {
      return fail(static_cast<int>(e.source().begin.line),
                  fmt::format("invalid TOML: {}", e.description()));
    }
    if (!check(root, kTopLevelKeys, "the top level")) return error();

    Group group;
    group.toml = fs::absolute(path_);
    group.dir = group.toml.parent_path();
    const toml::table* g = root["group"].as_table();
    if (!g) return fail(1, "missing [group] table");
    if (!parseGroupTable(*g, group)) return error();

    if (const toml::node* c = root.get("constants")) {
      const toml::table* t = c->as_table();
      if (!t) return fail(line(*c), "[constants] must be a table of name = \"type\"");
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
    }

    if (!parseVariants(root, group)) return error();
    if (group.variants.empty()) return fail(1, "the group declares no [[variant]] or [[family]]");
    return group;
  }

 private:
  static int line(const toml::node& n) { return static_cast<int>(n.source().begin.line); }

  Error error() const { return makeError(error_, ErrorKind::kUsage); }
  Error fail(int at, const std::string& rule) {
    error_ = fmt::format("{}:{}: {}", display_, at, rule);
    return makeError(error_, ErrorKind::kUsage);
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
    out.clear();
    for (const auto& e : *a) {
      const auto* i = e.as_integer();
      if (!i) return failed(line(e), "'supported_sms' entries must be integers such as 90");
      int sm = static_cast<int>(i->get());
      if (sm < 10 || sm > 999) return failed(line(e), fmt::format("SM {} is not an SM number", sm));
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
      if (!isIdentifier(e, true)) {
        const toml::node* n = t.get("entries");
        return failed(n ? line(*n) : at, fmt::format("entry '{}' is not a C identifier", e));
      }
    }
    return true;
  }

  bool checkSource(const toml::table& t, const fs::path& dir, const std::string& source, int at) {
    const toml::node* n = t.get("source");
    fs::path p = dir / source;
    if (!fs::is_regular_file(p))
      return failed(n ? line(*n) : at,
                    fmt::format("source '{}' does not exist ({})", source, p.string()));
    return true;
  }

  bool parseGroupTable(const toml::table& g, Group& group) {
    const int at = line(g);
    if (!check(g, kGroupKeys, "[group]")) return false;
    if (!getString(g, "name", group.name, true, at)) return false;
    if (!std::regex_match(group.name, std::regex("[a-z][a-z0-9]*")))
      return failed(line(*g.get("name")),
                    fmt::format("group name '{}' must match [a-z][a-z0-9]*", group.name));
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
          out.value = static_cast<std::int64_t>(i->get());
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
    for (const auto& d : group.constants)
      if (d.name == name) return &d;
    return nullptr;
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
  bool finish(const Group& group, std::vector<Constant> given, Variant& v, int at) {
    v.constants.clear();
    for (const auto& decl : group.constants) {
      int count = 0;
      for (const auto& c : given) {
        if (c.name == decl.name) {
          if (++count == 1) v.constants.push_back(c);
        }
      }
      if (count == 0)
        return failed(at,
                      fmt::format("variant '{}' does not set constant '{}'", v.name, decl.name));
      if (count > 1)
        return failed(
            at, fmt::format("variant '{}' sets constant '{}' more than once", v.name, decl.name));
    }
    std::string rule = checkVariantName(v.name, group.name);
    if (!rule.empty()) return failed(at, fmt::format("variant name '{}': {}", v.name, rule));
    for (const auto& other : group.variants) {
      if (other.name == v.name)
        return failed(at, fmt::format("duplicate variant name '{}' (first declared at line {})",
                                      v.name, other.line));
    }
    return true;
  }

  bool parseVariants(const toml::table& root, Group& group) {
    if (const toml::node* n = root.get("variant")) {
      const toml::array* arr = n->as_array();
      if (!arr) return failed(line(*n), "'variant' must be an array of tables ([[variant]])");
      for (const auto& e : *arr) {
        const toml::table* t = e.as_table();
        if (!t) return failed(line(e), "'variant' must be an array of tables ([[variant]])");
        if (!check(*t, kVariantKeys, "[[variant]]")) return false;
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
  const std::vector<int>& nvcc_sms_;
  Defaults defaults_;
  std::string error_;
};

}  // namespace

std::string checkVariantName(const std::string& name, const std::string& group) {
  constexpr std::size_t kMaxLength = 64;
  if (name.size() > kMaxLength)
    return fmt::format("is {} characters long; the limit is {}", name.size(), kMaxLength);
  if (!std::regex_match(name, std::regex("[a-z0-9_]+")))
    return "may contain only lower-case letters, digits and '_'";
  if (name.rfind(group + "_", 0) != 0)
    return fmt::format("must start with the group name and '_' ('{}_')", group);
  if (name.size() == group.size() + 1)
    return "needs at least one distinguishing field after the group name";
  if (name.find("__") != std::string::npos)
    return "must not contain '__' (reserved for the per-SM suffix __arch<NN>)";
  if (name.back() == '_') return "must not end with '_'";
  return {};
}

Result<Group> parseGroup(const fs::path& toml_path, const std::vector<int>& nvcc_sms) {
  if (!fs::is_regular_file(toml_path))
    return makeError(fmt::format("{}: no such registry file", toml_path.string()),
                     ErrorKind::kUsage);
  // Errors name the file as kernels/<group>/kiln.toml when it sits in a kiln tree.
  std::string display = toml_path.string();
  const fs::path group_dir = toml_path.parent_path();
  if (group_dir.parent_path().filename() == "kernels")
    display = (fs::path("kernels") / group_dir.filename() / toml_path.filename()).string();
  return Parser(toml_path, display, nvcc_sms).parse();
}

Result<Registry> loadRegistry(const fs::path& root, const std::vector<int>& nvcc_sms) {
  Registry registry;
  registry.root = fs::absolute(root);
  const fs::path kernels = registry.root / "kernels";
  if (!fs::is_directory(kernels))
    return makeError(fmt::format("{}: no kernels/ directory (is --root the kiln repository?)",
                                 registry.root.string()),
                     ErrorKind::kUsage);
  std::vector<fs::path> tomls;
  for (const auto& entry : fs::directory_iterator(kernels)) {
    if (entry.is_directory() && fs::is_regular_file(entry.path() / "kiln.toml"))
      tomls.push_back(entry.path() / "kiln.toml");
  }
  std::sort(tomls.begin(), tomls.end());
  for (const auto& t : tomls) {
    auto group = parseGroup(t, nvcc_sms);
    if (!group) return group.failure();
    for (const auto& v : group->variants) {
      if (const Variant* other = registry.findVariant(v.name)) {
        return makeError(fmt::format("kernels/{}/kiln.toml:{}: variant name '{}' is already used "
                                     "by group '{}'; names are unique across groups",
                                     v.group, v.line, v.name, other->group),
                         ErrorKind::kUsage);
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

int parseSm(const std::string& text) {
  std::string s = text;
  if (s.rfind("sm_", 0) == 0) s = s.substr(3);
  if (!s.empty() && s.back() == 'a') s.pop_back();
  if (s.empty() || s.size() > 3 || !std::all_of(s.begin(), s.end(), ::isdigit)) return 0;
  return std::stoi(s);
}

const char* dtypeCxxType(const std::string& dtype) {
  if (dtype == "fp16") return "__half";
  if (dtype == "bf16") return "__nv_bfloat16";
  if (dtype == "fp32") return "float";
  return nullptr;
}

}  // namespace kiln::core
