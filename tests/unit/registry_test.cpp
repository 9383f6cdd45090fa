// Registry rules: every invalid kiln.toml fails with file, line and the rule broken; families
// expand into typed variants; names are unique across groups. Also checks the real rmsnorm group.
#include "core/registry.h"

#include <gtest/gtest.h>

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
