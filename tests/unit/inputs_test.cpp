// Input hashing and source staging (core/inputs.h): which files are inputs and how they are
// keyed; the staged copy (its content-only path, read-only files with the fixed time), reuse of a
// sound copy, a new copy in place of one that lost a file, changed a time or is writable by
// others, a source that changed after it was hashed, a killed build's temporary, and many threads
// staging at once.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <functional>
#include <set>
#include <thread>
#include <vector>

#include "core/inputs.h"
#include "io/fs.h"
#include "unit/fake_toolchain.h"

namespace kiln::core {
namespace {

namespace fs = std::filesystem;
using kiln::testing::TempDir;

void writeTree(const fs::path& root) {
  ASSERT_TRUE(io::writeFile(root / "kernels/g/k.cu", "// kernel\n"));
  ASSERT_TRUE(io::writeFile(root / "kernels/g/sub/k.cuh", "// header\n"));
  ASSERT_TRUE(io::writeFile(root / "kernels/g/README.md", "# docs\n"));
  ASSERT_TRUE(io::writeFile(root / "kernels/g/.hidden", "editor state\n"));
}

InputMap inputsOf(const fs::path& root) {
  InputMap inputs;
  EXPECT_TRUE(addInputs(root / "kernels/g", "kernels/g/", inputs));
  return inputs;
}

struct stat statOf(const fs::path& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st;
}

TEST(Inputs, DocumentationAndHiddenFilesAreNotInputs) {
  TempDir tmp;
  writeTree(tmp.path());
  const InputMap inputs = inputsOf(tmp.path());
  ASSERT_EQ(inputs.size(), 2u);
  EXPECT_EQ(inputs.at("kernels/g/k.cu"), io::sha256Hex("// kernel\n"));
  EXPECT_EQ(inputs.at("kernels/g/sub/k.cuh"), io::sha256Hex("// header\n"));
}

TEST(Inputs, StagedCopyDependsOnContentOnly) {
  TempDir tmp;
  writeTree(tmp.path() / "one");
  writeTree(tmp.path() / "two/elsewhere");
  const fs::path stage = tmp.path() / "stage";
  auto a = stageInputs(tmp.path() / "one", inputsOf(tmp.path() / "one"), stage);
  auto b = stageInputs(tmp.path() / "two/elsewhere", inputsOf(tmp.path() / "two/elsewhere"), stage);
  ASSERT_TRUE(a) << a.error();
  ASSERT_TRUE(b) << b.error();
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(*a, stagedInputsDir(stage, inputsOf(tmp.path() / "one")));
  EXPECT_EQ(a->filename().string().rfind("kiln-src-", 0), 0u);
  EXPECT_EQ(*io::readFile(*a / "kernels/g/sub/k.cuh"), "// header\n");
  EXPECT_FALSE(fs::exists(*a / "kernels/g/README.md"));
  const struct stat st = statOf(*a / "kernels/g/k.cu");
  EXPECT_EQ(st.st_mtim.tv_sec, kStagedFileTime);
  EXPECT_EQ(st.st_mode & 0777, 0444u);
  EXPECT_EQ(statOf(*a / "kernels/g").st_mode & 0777, 0755u);

  ASSERT_TRUE(io::writeFile(tmp.path() / "one/kernels/g/k.cu", "// kernel, edited\n"));
  auto edited = stageInputs(tmp.path() / "one", inputsOf(tmp.path() / "one"), stage);
  ASSERT_TRUE(edited) << edited.error();
  EXPECT_NE(*edited, *a);
}

TEST(Inputs, SoundCopyIsReusedAndADamagedOneStagedAgain) {
  TempDir tmp;
  writeTree(tmp.path());
  const InputMap inputs = inputsOf(tmp.path());
  const fs::path stage = tmp.path() / "stage";
  auto first = stageInputs(tmp.path(), inputs, stage);
  ASSERT_TRUE(first) << first.error();
  const fs::path file = *first / "kernels/g/k.cu";
  const ino_t inode = statOf(file).st_ino;
  auto again = stageInputs(tmp.path(), inputs, stage);
  ASSERT_TRUE(again) << again.error();
  EXPECT_EQ(statOf(file).st_ino, inode);  // reused, not copied again

  // Each kind of damage gives a fresh, sound copy at the same path.
  const std::vector<std::function<void()>> damages = {
      [&] { fs::remove(file); },                                             // a /tmp cleaner
      [&] { fs::last_write_time(file, fs::file_time_type::clock::now()); },  // a touch
      [&] { fs::permissions(*first / "kernels/g", fs::perms::group_write, fs::perm_options::add); },
      [&] {
        fs::permissions(file, fs::perms::owner_write, fs::perm_options::add);  // an edit
        ASSERT_TRUE(io::writeFile(file, "// edited in place\n"));
      },
      [&] { ASSERT_TRUE(io::writeFile(*first / "kernels/g/extra.cuh", "// not an input\n")); },
  };
  for (size_t i = 0; i < damages.size(); ++i) {
    SCOPED_TRACE(i);
    damages[i]();
    auto repaired = stageInputs(tmp.path(), inputs, stage);
    ASSERT_TRUE(repaired) << repaired.error();
    EXPECT_EQ(*repaired, *first);
    EXPECT_EQ(*io::readFile(file), "// kernel\n");
    EXPECT_EQ(statOf(file).st_mtim.tv_sec, kStagedFileTime);
    EXPECT_FALSE(fs::exists(*first / "kernels/g/extra.cuh"));
    EXPECT_EQ(statOf(*first / "kernels/g").st_mode & 0777, 0755u);
  }
}

TEST(Inputs, SourceChangedAfterHashingIsAnErrorAndLeavesNothing) {
  TempDir tmp;
  writeTree(tmp.path());
  const InputMap inputs = inputsOf(tmp.path());
  ASSERT_TRUE(io::writeFile(tmp.path() / "kernels/g/k.cu", "// saved during the build\n"));
  const fs::path stage = tmp.path() / "stage";
  auto r = stageInputs(tmp.path(), inputs, stage);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find((tmp.path() / "kernels/g/k.cu").string() + " changed during the build"),
            std::string::npos)
      << r.error();
  EXPECT_TRUE(fs::is_empty(stage));
}

TEST(Inputs, KilledBuildsTemporaryCopyIsRemoved) {
  TempDir tmp;
  writeTree(tmp.path());
  const fs::path stage = tmp.path() / "stage";
  const fs::path abandoned = stage / ".kiln-src-0123456789abcdef.staging-999999999";
  ASSERT_TRUE(io::writeFile(abandoned / "kernels/g/k.cu", "// half"));
  auto r = stageInputs(tmp.path(), inputsOf(tmp.path()), stage);
  ASSERT_TRUE(r) << r.error();
  EXPECT_FALSE(fs::exists(abandoned));
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(stage))
    names.insert(entry.path().filename().string());
  EXPECT_EQ(names, std::set<std::string>{r->filename().string()});
}

// kiln -j N and two kiln processes: every stager gets the same sound copy, and no temporary is
// left behind.
TEST(Inputs, ConcurrentStagingAgrees) {
  TempDir tmp;
  writeTree(tmp.path());
  const InputMap inputs = inputsOf(tmp.path());
  const fs::path stage = tmp.path() / "stage";
  std::vector<std::thread> threads;
  std::vector<std::string> results(8);
  for (size_t i = 0; i < results.size(); ++i) {
    threads.emplace_back([&, i] {
      auto r = stageInputs(tmp.path(), inputs, stage);
      results[i] = r ? r->string() : "error: " + r.error();
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& r : results) EXPECT_EQ(r, stagedInputsDir(stage, inputs).string());
  EXPECT_EQ(std::distance(fs::directory_iterator(stage), fs::directory_iterator()), 1);
  EXPECT_EQ(*io::readFile(stagedInputsDir(stage, inputs) / "kernels/g/k.cu"), "// kernel\n");
}

}  // namespace
}  // namespace kiln::core
