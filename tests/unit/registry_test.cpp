// Registry rules: every invalid kiln.toml fails with file, line and the rule broken; families
// expand into typed variants; names are unique across groups. Also checks the real rmsnorm group.
#include "core/registry.h"
#include "core/naming.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "core/report.h"

namespace kiln::core {
namespace {

namespace fs = std::filesystem;

class RegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("kiln_registry_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
             "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_ / "kernels");
  }
  void TearDown() override { fs::remove_all(root_); }

  // Writes kernels/<group>/kiln.toml (and an empty source) and returns its path.
  fs::path writeGroup(const std::string& group, const std::string& toml) {
    fs::path dir = root_ / "kernels" / group;
    fs::create_directories(dir);
    std::ofstream(dir / "k.cu") << "// test source\n";
    std::ofstream(dir / "kiln.toml") << toml;
    return dir / "kiln.toml";
  }

  static std::string header(const std::string& name) {
    return "[group]\nname = \"" + name +
           "\"\nkind = \"cuda\"\nsource = \"k.cu\"\nentries = [\"kiln_k\"]\n"
           "supported_sms = [80, 90]\n\n[constants]\nhidden = \"int\"\ndtype = \"dtype\"\n\n";
  }

  std::string errorOf(const std::string& toml, const std::vector<int>& nvcc_sms = {}) {
    auto g = parseGroup(writeGroup("demo", toml), nvcc_sms);
    EXPECT_FALSE(g.ok()) << "expected an error";
    return g.ok() ? std::string() : g.error();
  }

  fs::path root_;
};

TEST_F(RegistryTest, FamilyExpandsToTypedVariants) {
  auto g = parseGroup(
      writeGroup("demo", header("demo") + "[[family]]\nname = \"demo_h{hidden}_{dtype}\"\n"
                                          "matrix = { hidden = [64, 128], dtype = [\"fp16\", "
                                          "\"bf16\"] }\n"),
      {80, 90});
  ASSERT_TRUE(g.ok()) << g.error();
  ASSERT_EQ(g->variants.size(), 4u);
  std::vector<std::string> names;
  for (const auto& v : g->variants) names.push_back(v.name);
  EXPECT_EQ(names, (std::vector<std::string>{"demo_h64_fp16", "demo_h128_fp16", "demo_h64_bf16",
                                             "demo_h128_bf16"}));
  const Variant& v = g->variants[1];
  ASSERT_EQ(v.constants.size(), 2u);
  EXPECT_EQ(v.constants[0].name, "hidden");  // declaration order, not key order
  EXPECT_EQ(std::get<std::int64_t>(v.constants[0].value), 128);
  EXPECT_EQ(v.constants[1].type, ConstantType::kDtype);
  EXPECT_EQ(std::get<std::string>(v.constants[1].value), "fp16");
  EXPECT_EQ(v.supported_sms, (std::vector<int>{80, 90}));
  EXPECT_EQ(v.entries, std::vector<std::string>{"kiln_k"});
  EXPECT_EQ(v.source.filename(), "k.cu");
  EXPECT_EQ(v.line, 12);
}

TEST_F(RegistryTest, SingleVariantWithOverrides) {
  auto g = parseGroup(
      writeGroup("demo", header("demo") + "[[variant]]\nname = \"demo_big\"\nsupported_sms = "
                                          "[90]\narch_specific = true\n"
                                          "constants = { hidden = 4096, dtype = \"bf16\" }\n"),
      {});
  ASSERT_TRUE(g.ok()) << g.error();
  ASSERT_EQ(g->variants.size(), 1u);
  EXPECT_TRUE(g->variants[0].arch_specific);
  EXPECT_EQ(g->variants[0].supported_sms, std::vector<int>{90});
}

TEST_F(RegistryTest, UnknownKeyNamesFileLineAndKey) {
  std::string e = errorOf(header("demo") +
                          "[[family]]\nname = \"demo_h{hidden}_{dtype}\"\n"
                          "hiden = 3\n");
  EXPECT_NE(e.find("kernels/demo/kiln.toml:14:"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown key 'hiden' in [[family]]"), std::string::npos) << e;
}

TEST_F(RegistryTest, MalformedAndDuplicateNames) {
  EXPECT_NE(errorOf(header("demo") + "[[variant]]\nname = \"Demo_X\"\n"
                                     "constants = { hidden = 1, dtype = \"bf16\" }\n")
                .find("lower-case"),
            std::string::npos);
  EXPECT_NE(errorOf(header("demo") + "[[variant]]\nname = \"other_x\"\n"
                                     "constants = { hidden = 1, dtype = \"bf16\" }\n")
                .find("must start with the group name"),
            std::string::npos);
  EXPECT_NE(errorOf(header("demo") + "[[variant]]\nname = \"demo__x\"\n"
                                     "constants = { hidden = 1, dtype = \"bf16\" }\n")
                .find("'__'"),
            std::string::npos);
  std::string dup = errorOf(header("demo") +
                            "[[variant]]\nname = \"demo_x\"\nconstants = { hidden = 1, dtype = "
                            "\"bf16\" }\n[[variant]]\nname = \"demo_x\"\nconstants = { hidden = 2, "
                            "dtype = \"bf16\" }\n");
  EXPECT_NE(dup.find("duplicate variant name 'demo_x' (first declared at line 12)"),
            std::string::npos)
      << dup;
}

TEST_F(RegistryTest, SmNotSupportedByNvcc) {
  std::string e = errorOf(header("demo") +
                              "[[variant]]\nname = \"demo_x\"\n"
                              "constants = { hidden = 1, dtype = \"bf16\" }\n",
                          {75, 90});
  EXPECT_NE(e.find("kernels/demo/kiln.toml:6: sm_80 is not supported by the installed nvcc "
                   "(it targets sm_75, sm_90)"),
            std::string::npos)
      << e;
}

TEST_F(RegistryTest, VariantSmsMustBeSubsetOfGroup) {
  std::string e = errorOf(header("demo") +
                          "[[variant]]\nname = \"demo_x\"\nsupported_sms = [86]\n"
                          "constants = { hidden = 1, dtype = \"bf16\" }\n");
  EXPECT_NE(e.find("sm_86 is not in the group's supported_sms (80, 90)"), std::string::npos) << e;
}

TEST_F(RegistryTest, ConstantOfWrongType) {
  std::string e = errorOf(header("demo") +
                          "[[variant]]\nname = \"demo_x\"\n"
                          "constants = { hidden = \"big\", dtype = \"bf16\" }\n");
  EXPECT_NE(e.find(":14: constant 'hidden' is declared int but the value is the string \"big\""),
            std::string::npos)
      << e;
  std::string d = errorOf(header("demo") +
                          "[[variant]]\nname = \"demo_x\"\n"
                          "constants = { hidden = 1, dtype = \"fp64\" }\n");
  EXPECT_NE(d.find("unknown dtype 'fp64'"), std::string::npos) << d;
}

TEST_F(RegistryTest, MissingUndeclaredAndRepeatedConstants) {
  EXPECT_NE(errorOf(header("demo") + "[[variant]]\nname = \"demo_x\"\nconstants = { hidden = 1 }\n")
                .find("does not set constant 'dtype'"),
            std::string::npos);
  EXPECT_NE(errorOf(header("demo") + "[[variant]]\nname = \"demo_x\"\n"
                                     "constants = { hidden = 1, dtype = \"bf16\", tile = 3 }\n")
                .find("constant 'tile' is not declared in [constants]"),
            std::string::npos);
  EXPECT_NE(errorOf(header("demo") + "[[family]]\nname = \"demo_h{hidden}\"\n"
                                     "matrix = { hidden = [1, 2] }\n"
                                     "constants = { hidden = 3, dtype = \"bf16\" }\n")
                .find("sets constant 'hidden' more than once"),
            std::string::npos);
}

TEST_F(RegistryTest, FamilyNameMustCarryEveryMatrixKey) {
  std::string e = errorOf(header("demo") +
                          "[[family]]\nname = \"demo_h{hidden}\"\n"
                          "matrix = { hidden = [1, 2], dtype = [\"fp16\", "
                          "\"bf16\"] }\n");
  EXPECT_NE(e.find("must contain {dtype}"), std::string::npos) << e;
}

TEST_F(RegistryTest, GroupRules) {
  EXPECT_NE(errorOf("[group]\nname = \"other\"\nkind = \"cuda\"\nsource = \"k.cu\"\n"
                    "entries = [\"k\"]\nsupported_sms = [90]\n")
                .find("must equal its directory name 'demo'"),
            std::string::npos);
  EXPECT_NE(errorOf("[group]\nname = \"demo\"\nkind = \"hip\"\nsource = \"k.cu\"\n"
                    "entries = [\"k\"]\nsupported_sms = [90]\n")
                .find(":3: unknown kind 'hip'"),
            std::string::npos);
  EXPECT_NE(errorOf("[group]\nname = \"demo\"\nkind = \"cuda\"\nsource = \"missing.cu\"\n"
                    "entries = [\"k\"]\nsupported_sms = [90]\n")
                .find(":4: source 'missing.cu' does not exist"),
            std::string::npos);
  EXPECT_NE(errorOf("[group]\nname = \"demo\"\nkind = \"cuda\"\nsource = \"k.cu\"\n"
                    "entries = [\"k\"]\n")
                .find("missing required key 'supported_sms'"),
            std::string::npos);
  EXPECT_NE(errorOf("[group]\nname = \"demo\"\nkind = \"cuda\"\nsource = \"k.cu\"\n"
                    "entries = [\"k\"]\nsupported_sms = [90]\n")
                .find("declares no [[variant]] or [[family]]"),
            std::string::npos);
  EXPECT_NE(errorOf("[group\nname = 1\n").find("kernels/demo/kiln.toml:1: invalid TOML"),
            std::string::npos);
}

TEST_F(RegistryTest, NamesUniqueAcrossGroups) {
  writeGroup("alpha", header("alpha") +
                          "[[variant]]\nname = \"alpha_x\"\n"
                          "constants = { hidden = 1, dtype = \"bf16\" }\n");
  // Group names have no underscore, so the prefix rule alone keeps names unique across groups;
  // loadRegistry checks it anyway.
  writeGroup("beta", header("beta") +
                         "[[variant]]\nname = \"beta_x\"\n"
                         "constants = { hidden = 1, dtype = \"bf16\" }\n");
  auto ok = loadRegistry(root_, {});
  ASSERT_TRUE(ok.ok()) << ok.error();
  EXPECT_EQ(ok->groups.size(), 2u);
  EXPECT_NE(ok->findVariant("beta_x"), nullptr);
  EXPECT_EQ(ok->findGroup("gamma"), nullptr);
}

// Issue 32, item 1: kiln.toml has no schema_version key (metadata.json has); any value of one is
// refused as an unknown key, and a key given twice is invalid TOML (toml++ refuses it).
TEST_F(RegistryTest, SchemaVersionIsRefusedAndKeysCannotRepeat) {
  const std::string body =
      "[[variant]]\nname = \"demo_x\"\nconstants = { hidden = 1, dtype = \"bf16\" }\n";
  for (const char* value : {"true", "1.5", "4294967297", "1"}) {
    std::string e =
        errorOf(std::string("schema_version = ") + value + "\n" + header("demo") + body);
    EXPECT_NE(e.find("kernels/demo/kiln.toml:1: unknown key 'schema_version' in the top level"),
              std::string::npos)
        << e;
  }
  std::string twice = errorOf("schema_version = 2\nschema_version = 1\n" + header("demo") + body);
  EXPECT_NE(twice.find("kernels/demo/kiln.toml:2: invalid TOML"), std::string::npos) << twice;
  std::string name_twice = errorOf("[group]\nname = \"demo\"\nname = \"demo\"\n");
  EXPECT_NE(name_twice.find(":3: invalid TOML"), std::string::npos) << name_twice;
  EXPECT_NE(name_twice.find("redefine"), std::string::npos) << name_twice;
}

// Item 2: an SM is an integer from 10 to 999; nothing is truncated into range.
TEST_F(RegistryTest, SupportedSmsOutOfRangeOrNotIntegers) {
  const std::string body = "constants = { hidden = 1, dtype = \"bf16\" }\n";
  std::string e = errorOf(header("demo") +
                          "[[variant]]\nname = \"demo_x\"\n"
                          "supported_sms = [4294967386]\n" +
                          body);
  EXPECT_NE(e.find("kernels/demo/kiln.toml:14: 'supported_sms' entry 4294967386 is out of range: "
                   "SMs are integers from 10 to 999"),
            std::string::npos)
      << e;
  for (const char* sm : {"9", "1000", "-90", "9223372036854775807"}) {
    std::string group = header("demo");
    group.replace(group.find("[80, 90]"), 8, std::string("[80, ") + sm + "]");
    std::string g = errorOf(group + "[[variant]]\nname = \"demo_x\"\n" + body);
    EXPECT_NE(g.find(std::string(":6: 'supported_sms' entry ") + sm + " is out of range"),
              std::string::npos)
        << g;
  }
  std::string f = errorOf(header("demo") +
                          "[[variant]]\nname = \"demo_x\"\n"
                          "supported_sms = [90.0]\n" +
                          body);
  EXPECT_NE(f.find("'supported_sms' entry the float 90 is not an SM number"), std::string::npos)
      << f;
  std::string s = errorOf(header("demo") +
                          "[[variant]]\nname = \"demo_x\"\n"
                          "supported_sms = [\"90\"]\n" +
                          body);
  EXPECT_NE(s.find("'supported_sms' entry the string \"90\" is not an SM number"),
            std::string::npos)
      << s;
}

// Item 2: int constants are baked as C++ int, so they must fit one.
TEST_F(RegistryTest, IntConstantsFitACppInt) {
  for (const char* value : {"9223372036854775807", "2147483648", "-2147483649"}) {
    std::string e = errorOf(header("demo") +
                            "[[variant]]\nname = \"demo_x\"\n"
                            "constants = { hidden = " +
                            value + ", dtype = \"bf16\" }\n");
    EXPECT_NE(e.find(std::string(":14: constant 'hidden' = ") + value +
                     " is out of range: int constants are baked as C++ int (-2147483648 to "
                     "2147483647)"),
              std::string::npos)
        << e;
  }
  std::string m = errorOf(header("demo") +
                          "[[family]]\nname = \"demo_h{hidden}\"\n"
                          "matrix = { hidden = [1, 4294967296] }\n"
                          "constants = { dtype = \"bf16\" }\n");
  EXPECT_NE(m.find("constant 'hidden' = 4294967296 is out of range"), std::string::npos) << m;
  auto g =
      parseGroup(writeGroup("demo", header("demo") +
                                        "[[variant]]\nname = \"demo_max\"\n"
                                        "constants = { hidden = 2147483647, dtype = \"bf16\" }\n"
                                        "[[variant]]\nname = \"demo_min\"\n"
                                        "constants = { hidden = -2147483648, dtype = \"bf16\" }\n"),
                 {});
  ASSERT_TRUE(g.ok()) << g.error();
  EXPECT_EQ(std::get<std::int64_t>(g->variants[0].constants[0].value), 2147483647);
  EXPECT_EQ(std::get<std::int64_t>(g->variants[1].constants[0].value), -2147483647LL - 1);
}

// Item 3: a source lies in the group directory: relative, without '..', and no symlink leading
// out of it; the same for a [[variant]] or [[family]] override.
TEST_F(RegistryTest, SourcesLieInTheGroupDirectory) {
  const std::string body =
      "[[variant]]\nname = \"demo_x\"\nconstants = { hidden = 1, dtype = \"bf16\" }\n";
  auto withSource = [&](const std::string& source) {
    std::string group = header("demo");
    group.replace(group.find("\"k.cu\""), 6, "\"" + source + "\"");
    return group + body;
  };
  std::string abs = errorOf(withSource("/etc/passwd"));
  EXPECT_NE(abs.find("kernels/demo/kiln.toml:4: source '/etc/passwd' is an absolute path"),
            std::string::npos)
      << abs;
  writeGroup("other", "");
  std::string up = errorOf(withSource("../other/k.cu"));
  EXPECT_NE(up.find(":4: source '../other/k.cu' contains '..'"), std::string::npos) << up;
  std::string up2 = errorOf(withSource("sub/../k.cu"));
  EXPECT_NE(up2.find("contains '..'"), std::string::npos) << up2;
  std::string empty = errorOf(withSource(""));
  EXPECT_NE(empty.find(":4: 'source' must not be empty"), std::string::npos) << empty;

  const fs::path dir = root_ / "kernels" / "demo";
  fs::create_symlink("/etc/passwd", dir / "passwd.cu");
  std::string link = errorOf(withSource("passwd.cu"));
  EXPECT_NE(link.find(":4: source 'passwd.cu' resolves to /etc/passwd, outside the group "
                      "directory"),
            std::string::npos)
      << link;
  fs::create_symlink("../other", dir / "otherdir");
  std::string dirlink = errorOf(withSource("otherdir/k.cu"));
  EXPECT_NE(dirlink.find("outside the group directory"), std::string::npos) << dirlink;
  fs::create_directories(dir / "sub");
  std::string notfile = errorOf(withSource("sub"));
  EXPECT_NE(notfile.find(":4: source 'sub' is not a regular file"), std::string::npos) << notfile;

  // Overrides follow the same rules.
  std::string family = errorOf(header("demo") +
                               "[[family]]\nname = \"demo_h{hidden}\"\nsource = \"/etc/passwd\"\n"
                               "matrix = { hidden = [1] }\nconstants = { dtype = \"bf16\" }\n");
  EXPECT_NE(family.find(":14: source '/etc/passwd' is an absolute path"), std::string::npos)
      << family;
  std::string variant = errorOf(header("demo") +
                                "[[variant]]\nname = \"demo_x\"\nsource = \"passwd.cu\"\n"
                                "constants = { hidden = 1, dtype = \"bf16\" }\n");
  EXPECT_NE(variant.find(":14: source 'passwd.cu' resolves to /etc/passwd"), std::string::npos)
      << variant;

  // A symlink that stays inside the group directory is fine.
  std::ofstream(dir / "sub" / "real.cu") << "// real\n";
  fs::create_symlink("sub/real.cu", dir / "alias.cu");
  auto ok = parseGroup(writeGroup("demo", withSource("alias.cu")), {});
  ASSERT_TRUE(ok.ok()) << ok.error();
  EXPECT_EQ(ok->variants[0].source, dir / "alias.cu");
}

// Item 4: kiln.toml must be a regular file of at most 1 MiB; a FIFO or a device is refused at
// once (never read, never blocked on), by parseGroup and by loadRegistry, naming the path.
TEST_F(RegistryTest, KilnTomlMustBeARegularFileOfBoundedSize) {
  const fs::path dir = root_ / "kernels" / "demo";
  fs::create_directories(dir);
  std::ofstream(dir / "k.cu") << "// test source\n";
  const fs::path toml = dir / "kiln.toml";
  auto expectRefused = [&](const std::string& what) {
    const auto start = std::chrono::steady_clock::now();
    auto g = parseGroup(toml, {});
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.error(), "kernels/demo/kiln.toml: " + what);
    auto r = loadRegistry(root_, {});
    ASSERT_FALSE(r.ok()) << "the group must not vanish silently";
    EXPECT_EQ(r.error(), "kernels/demo/kiln.toml: " + what);
    EXPECT_EQ(r.errorKind(), ErrorKind::kUsage);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
    fs::remove(toml);
  };
  ASSERT_EQ(::mkfifo(toml.c_str(), 0644), 0);
  expectRefused("is a FIFO; a kiln.toml must be a regular file");
  fs::create_symlink("/dev/zero", toml);
  expectRefused("is a character device; a kiln.toml must be a regular file");
  fs::create_directories(toml);
  expectRefused("is a directory; a kiln.toml must be a regular file");
  fs::create_symlink("missing.toml", toml);
  expectRefused("no such registry file");
  std::ofstream(toml) << header("demo") << std::string(kMaxRegistryFileBytes, '#');
  expectRefused(fmt::format("is {} bytes; the limit for a kiln.toml is 1048576 bytes (1 MiB)",
                            header("demo").size() + kMaxRegistryFileBytes));
  // Exactly at the limit is read (and here fails on its content, not its size).
  std::ofstream(toml) << std::string(kMaxRegistryFileBytes, '#');
  auto at_limit = parseGroup(toml, {});
  ASSERT_FALSE(at_limit.ok());
  EXPECT_NE(at_limit.error().find("missing [group] table"), std::string::npos) << at_limit.error();
  // A directory without kiln.toml (kernels/common) is not a group.
  fs::remove(toml);
  fs::create_directories(root_ / "kernels" / "common");
  auto none = loadRegistry(root_, {});
  ASSERT_TRUE(none.ok()) << none.error();
  EXPECT_TRUE(none->groups.empty());
}

// Item 5: control characters (C0, DEL, C1) in any key or string are refused when parsing, and
// the message quotes them escaped, so nothing kiln prints can drive the terminal.
TEST_F(RegistryTest, ControlCharactersAreRefused) {
  const std::string body =
      "[[variant]]\nname = \"demo_x\"\nconstants = { hidden = 1, dtype = \"bf16\" }\n";
  auto expectRefused = [&](const std::string& toml, const std::string& expected) {
    std::string e = errorOf(toml);
    EXPECT_NE(e.find(expected), std::string::npos) << e;
    EXPECT_NE(e.find("may not contain control characters"), std::string::npos) << e;
    for (unsigned char c : e) EXPECT_TRUE(c >= 0x20 && c != 0x7f) << "raw control in: " << e;
    EXPECT_EQ(e.find("\xc2\x9b"), std::string::npos) << e;
  };
  std::string group = header("demo");
  const std::string with_description =
      group.insert(group.find("source"), "description = \"\\u001b[2J\\u001b[31mred\"\n") + body;
  expectRefused(with_description,
                ":4: the string \"\\x1b[2J\\x1b[31mred\" contains the control character U+001B");
  expectRefused(header("demo") +
                    "[[variant]]\nname = \"demo_x\\u009b31m\"\n"
                    "constants = { hidden = 1, dtype = \"bf16\" }\n",
                ":13: the string \"demo_x\\u009b31m\" contains the control character U+009B");
  expectRefused(header("demo") + "\"bad\\u0007key\" = 1\n" + body,
                "the key \"bad\\x07key\" contains the control character U+0007");
  expectRefused(header("demo") +
                    "[[variant]]\nname = \"demo_x\"\nnvcc_flags = [\"-O3\\n-g\"]\n"
                    "constants = { hidden = 1, dtype = \"bf16\" }\n",
                ":14: the string \"-O3\\x0a-g\" contains the control character U+000A");
  expectRefused(header("demo") +
                    "[[variant]]\nname = \"demo_x\"\nnvcc_flags = [\"-O3\\t-g\"]\n"
                    "constants = { hidden = 1, dtype = \"bf16\" }\n",
                "U+0009");
  expectRefused(header("demo") +
                    "[[variant]]\nname = \"demo_x\"\nnvcc_flags = [\"\\u007f\"]\n"
                    "constants = { hidden = 1, dtype = \"bf16\" }\n",
                "U+007F");
  // Non-ASCII text that is not a control character is fine in a description.
  std::string fine = header("demo");
  fine.insert(fine.find("source"), "description = \"RMSNorm \\u00b7 fp16 \\u2192 fp32\"\n");
  auto g = parseGroup(writeGroup("demo", fine + body), {});
  ASSERT_TRUE(g.ok()) << g.error();
  EXPECT_EQ(g->description, "RMSNorm \u00b7 fp16 \u2192 fp32");

  EXPECT_EQ(escapeControl("a\x1b[31mb\tc\x7f\xc2\x9b\xc2\xb7"),
            "a\\x1b[31mb\\x09c\\x7f\\u009b\xc2\xb7");
}

TEST_F(RegistryTest, StringKeyAndListLengthsAreBounded) {
  const std::string body =
      "[[variant]]\nname = \"demo_x\"\nconstants = { hidden = 1, dtype = \"bf16\" }\n";
  std::string group = header("demo");
  group.insert(group.find("source"), "description = \"" + std::string(300, 'x') + "\"\n");
  std::string e = errorOf(group + body);
  EXPECT_NE(e.find(":4: the string \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...\" is 300 bytes long; "
                   "the limit is 256"),
            std::string::npos)
      << e;
  std::string key = errorOf(header("demo") + std::string(65, 'k') + " = 1\n" + body);
  EXPECT_NE(key.find("is 65 bytes long; the limit is 64"), std::string::npos) << key;
  std::string entries = "[";
  for (int i = 0; i < 33; ++i) entries += fmt::format("{}\"k{}\"", i ? ", " : "", i);
  std::string list =
      errorOf(header("demo") + "[[variant]]\nname = \"demo_x\"\nentries = " + entries +
              "]\nconstants = { hidden = 1, dtype = \"bf16\" }\n");
  EXPECT_NE(list.find(":14: 'entries' has 33 items; the limit is 32"), std::string::npos) << list;
  std::string constants =
      "[group]\nname = \"demo\"\nkind = \"cuda\"\nsource = \"k.cu\"\n"
      "entries = [\"k\"]\nsupported_sms = [90]\n[constants]\n";
  for (int i = 0; i < 33; ++i) constants += fmt::format("c{} = \"int\"\n", i);
  std::string many = errorOf(constants);
  EXPECT_NE(many.find(":7: [constants] declares 33 constants; the limit is 32"), std::string::npos)
      << many;
}

// Item 6: an unreadable kernels/ is a registry error naming it, not an uncaught
// filesystem_error. Root reads any directory, so the check runs as `nobody` in a child.
TEST_F(RegistryTest, UnreadableKernelsDirectoryIsAnError) {
  writeGroup("demo", header("demo") +
                         "[[variant]]\nname = \"demo_x\"\n"
                         "constants = { hidden = 1, dtype = \"bf16\" }\n");
  fs::permissions(root_, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  auto attempt = [&](const fs::path& locked) -> std::string {
    fs::permissions(locked, fs::perms::none);
    int pipe_fds[2];
    EXPECT_EQ(::pipe(pipe_fds), 0);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(pipe_fds[0]);
      std::string result;
      if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) {
        result = "cannot drop to nobody";
      } else {
        try {
          auto r = loadRegistry(root_, {});
          result = r.ok() ? "ok" : fmt::format("{}|{}", static_cast<int>(r.errorKind()), r.error());
        } catch (const std::exception& e) {
          result = std::string("threw: ") + e.what();
        }
      }
      (void)!::write(pipe_fds[1], result.data(), result.size());
      ::_exit(0);
    }
    ::close(pipe_fds[1]);
    std::string result;
    char buffer[512];
    for (ssize_t n; (n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0;) result.append(buffer, n);
    ::close(pipe_fds[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    fs::permissions(locked, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                fs::perms::others_read | fs::perms::others_exec);
    return result;
  };
  const std::string usage = std::to_string(static_cast<int>(ErrorKind::kUsage)) + "|";
  EXPECT_EQ(attempt(root_ / "kernels"),
            usage + (root_ / "kernels").string() +
                ": cannot read the registry directory: Permission denied");
  EXPECT_EQ(attempt(root_ / "kernels" / "demo"),
            usage + "kernels/demo/kiln.toml: cannot read: Permission denied");
  EXPECT_EQ(attempt(root_ / "kernels" / "demo" / "kiln.toml"),
            usage + "kernels/demo/kiln.toml: cannot open: Permission denied");

  // kernels/ that is a file, or missing.
  fs::remove_all(root_ / "kernels");
  std::ofstream(root_ / "kernels") << "";
  auto file = loadRegistry(root_, {});
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.error().find("no kernels/ directory"), std::string::npos) << file.error();
}

// Item 7: a family is refused before it is expanded when it would pass the per-kiln.toml cap;
// the largest allowed group parses fast (the duplicate-name check is a hash look-up).
TEST_F(RegistryTest, VariantCountsAreCappedAndLargeGroupsParseFast) {
  std::string axes =
      "[group]\nname = \"demo\"\nkind = \"cuda\"\nsource = \"k.cu\"\n"
      "entries = [\"k\"]\nsupported_sms = [90]\n[constants]\n"
      "a = \"int\"\nb = \"int\"\nc = \"int\"\nd = \"int\"\ne = \"int\"\n";
  const std::string ten = "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]";
  const std::string bomb = axes +
                           "[[family]]\nname = \"demo_a{a}_b{b}_c{c}_d{d}_e{e}\"\n"
                           "matrix = { a = " +
                           ten + ", b = " + ten + ", c = " + ten + ", d = " + ten + ", e = " + ten +
                           " }\n";
  auto start = std::chrono::steady_clock::now();
  std::string e = errorOf(bomb);
  EXPECT_NE(e.find("kernels/demo/kiln.toml:13: [[family]] 'demo_a{a}_b{b}_c{c}_d{d}_e{e}' expands "
                   "to 100000 variants (matrix 10 x 10 x 10 x 10 x 10); the limit for a kiln.toml "
                   "is 4096 variants"),
            std::string::npos)
      << e;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(500));

  // A product that does not fit 64 bits: 1000^7.
  std::string values = "[";
  for (int i = 0; i < 1000; ++i) values += fmt::format("{}{}", i ? ", " : "", i);
  values += "]";
  std::string seven =
      "[group]\nname = \"demo\"\nkind = \"cuda\"\nsource = \"k.cu\"\n"
      "entries = [\"k\"]\nsupported_sms = [90]\n[constants]\n";
  std::string pattern = "demo", matrix;
  for (char c = 'a'; c < 'a' + 7; ++c) {
    seven += fmt::format("{} = \"int\"\n", c);
    pattern += fmt::format("_{}{{{}}}", c, c);
    matrix += fmt::format("{}{} = {}", matrix.empty() ? "" : ", ", c, values);
  }
  std::string huge =
      errorOf(seven + "[[family]]\nname = \"" + pattern + "\"\nmatrix = { " + matrix + " }\n");
  EXPECT_NE(huge.find("expands to more than 2^64 variants"), std::string::npos) << huge;

  // 64 x 64 = 4096 variants: the limit exactly, accepted quickly; one more variant is refused.
  std::string sixty_four = "[";
  for (int i = 0; i < 64; ++i) sixty_four += fmt::format("{}{}", i ? ", " : "", i);
  sixty_four += "]";
  start = std::chrono::steady_clock::now();
  auto ok = parseGroup(
      writeGroup("demo", header("demo") + "[[family]]\nname = \"demo_h{hidden}_{dtype}\"\n" +
                             "matrix = { hidden = " + sixty_four +
                             ", dtype = [\"fp16\", \"bf16\"] }\n" +
                             "[[family]]\nname = \"demo_x{hidden}_{dtype}\"\nmatrix = { hidden = " +
                             sixty_four + ", dtype = [\"fp32\"] }\n"),
      {});
  ASSERT_TRUE(ok.ok()) << ok.error();
  EXPECT_EQ(ok->variants.size(), 3u * 64u);
  auto max =
      parseGroup(writeGroup("demo", axes + "[[family]]\nname = \"demo_a{a}_b{b}_c{c}\"\n" +
                                        "matrix = { a = " + sixty_four + ", b = " + sixty_four +
                                        " }\n" + "constants = { c = 0, d = 0, e = 0 }\n"),
                 {});
  ASSERT_TRUE(max.ok()) << max.error();
  EXPECT_EQ(max->variants.size(), kMaxVariantsPerGroup);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(500));

  std::string over = errorOf(axes +
                             "[[variant]]\nname = \"demo_first\"\n"
                             "constants = { a = 0, b = 0, c = 0, d = 0, e = 0 }\n"
                             "[[family]]\nname = \"demo_a{a}_b{b}_c{c}\"\n" +
                             "matrix = { a = " + sixty_four + ", b = " + sixty_four + " }\n" +
                             "constants = { c = 0, d = 0, e = 0 }\n");
  EXPECT_NE(over.find("expands to 4096 variants (matrix 64 x 64), after 1 declared before it; the "
                      "limit for a kiln.toml is 4096 variants"),
            std::string::npos)
      << over;

  // [[variant]] tables count too.
  std::string tables = axes;
  for (std::size_t i = 0; i <= kMaxVariantsPerGroup; ++i)
    tables += fmt::format(
        "[[variant]]\nname = \"demo_v{}\"\n"
        "constants = {{ a = 0, b = 0, c = 0, d = 0, e = 0 }}\n",
        i);
  std::string count = errorOf(tables);
  EXPECT_NE(count.find("this [[variant]] would be variant 4097; the limit for a kiln.toml is 4096 "
                       "variants"),
            std::string::npos)
      << count;
}

TEST_F(RegistryTest, RegistryWideVariantCap) {
  std::string sixty_four = "[";
  for (int i = 0; i < 64; ++i) sixty_four += fmt::format("{}{}", i ? ", " : "", i);
  sixty_four += "]";
  // Three groups of 64 x 64 = 4096 variants each: every one at its own cap, 12288 together.
  for (const char* group : {"ga", "gb", "gc"}) {
    writeGroup(group, "[group]\nname = \"" + std::string(group) +
                          "\"\nkind = \"cuda\"\nsource = \"k.cu\"\nentries = [\"k\"]\n"
                          "supported_sms = [90]\n[constants]\na = \"int\"\nb = \"int\"\n"
                          "[[family]]\nname = \"" +
                          group + "_a{a}_b{b}\"\nmatrix = { a = " + sixty_four +
                          ", b = " + sixty_four + " }\n");
  }
  const auto start = std::chrono::steady_clock::now();
  auto r = loadRegistry(root_, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(),
            "kernels/gc/kiln.toml: the registry has 12288 variants with this group; the limit for "
            "all groups together is 8192");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  fs::remove_all(root_ / "kernels" / "gc");
  auto two = loadRegistry(root_, {});
  ASSERT_TRUE(two.ok()) << two.error();
  EXPECT_NE(two->findVariant("gb_a63_b63"), nullptr);
}

TEST(VariantName, Grammar) {
  EXPECT_EQ(checkVariantName("rmsnorm_h4096_bf16", "rmsnorm"), "");
  EXPECT_NE(checkVariantName("rmsnorm_", "rmsnorm"), "");
  EXPECT_NE(checkVariantName("rmsnorm_x_", "rmsnorm"), "");
  EXPECT_NE(checkVariantName("rmsnorm_" + std::string(60, 'a'), "rmsnorm"), "");
  EXPECT_NE(checkVariantName("rmsnorm-h4096", "rmsnorm"), "");
}

TEST(Sm, Parse) {
  EXPECT_EQ(parseSm("sm_90"), 90);
  EXPECT_EQ(parseSm("sm_90a"), 90);
  EXPECT_EQ(parseSm("120"), 120);
  EXPECT_EQ(parseSm("sm_"), 0);
  EXPECT_EQ(parseSm("sm_9x"), 0);
  EXPECT_STREQ(dtypeCxxType("bf16"), "__nv_bfloat16");
  EXPECT_EQ(dtypeCxxType("fp64"), nullptr);
}

// The repository's own registry parses, and rmsnorm declares the hidden sizes the issue asks for.
TEST(RepositoryRegistry, RmsnormGroup) {
  auto r = loadRegistry(KILN_SOURCE_DIR, {});
  ASSERT_TRUE(r.ok()) << r.error();
  const Group* g = r->findGroup("rmsnorm");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->supported_sms, (std::vector<int>{80, 86, 87, 89, 90, 100, 110, 120}));
  for (int hidden : {1024, 2048, 2560, 3072, 4096, 5120, 7168, 8192}) {
    for (const char* dtype : {"fp16", "bf16"}) {
      std::string name = "rmsnorm_h" + std::to_string(hidden) + "_" + dtype;
      EXPECT_NE(r->findVariant(name), nullptr) << name;
    }
  }
}

TEST_F(RegistryTest, ListAlignsEachGroupsVariantsInColumns) {
  auto g = parseGroup(
      writeGroup("demo", header("demo") + "[[family]]\nname = \"demo_h{hidden}_{dtype}\"\n"
                                          "matrix = { hidden = [64, 1024], dtype = [\"fp16\"] }\n"),
      {80, 90});
  ASSERT_TRUE(g.ok()) << g.error();
  Registry registry;
  registry.groups.push_back(*g);
  std::istringstream lines(listTable(registry));
  std::vector<std::string> rows;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("  demo_", 0) == 0) rows.push_back(line);
  }
  ASSERT_EQ(rows.size(), 2u) << listTable(registry);
  // "  demo_h64_fp16    hidden=64 dtype=\"fp16\"    sm [80,90]": the constants and the SMs start in
  // the same column on every line, whatever the name's and the values' lengths.
  EXPECT_EQ(rows[0].find("hidden="), rows[1].find("hidden=")) << rows[0] << "\n" << rows[1];
  EXPECT_EQ(rows[0].find("sm ["), rows[1].find("sm [")) << rows[0] << "\n" << rows[1];
  EXPECT_NE(rows[0].find("sm [80,90]"), std::string::npos) << rows[0];
}

}  // namespace
}  // namespace kiln::core
