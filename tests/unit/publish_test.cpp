// Publish on a fake filesystem (fake_fs.h): a build whose every step goes through StagedArtifact
// as runBuild's do (the compilers' outputs stand in as files written into the staging directory).
// Killed at each step in turn, or failing at each step in turn, it leaves the previous artifact
// whole (or the new one, once renamed into place), and the next build cleans up what was left;
// failing renames name the path; a merge refuses a modified image; the leftovers of builds that
// still run, or of other tags, are left alone.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/publish.h"
#include "io/fs.h"
#include "unit/fake_fs.h"

namespace kiln::core {
namespace {

namespace fs = std::filesystem;
using Files = std::map<std::string, std::string>;
using kiln::testing::FakeFileSystem;

const fs::path kArtifacts = "/repo/artifacts/x86_64";
const fs::path kArtifact = kArtifacts / "sm_90";

// The previous artifact, and the build that merges into it: it keeps a.sm_90.cubin, rebuilds b.
const Files kOld = {{"metadata.json", "old"},
                    {"cubins/a.sm_90.cubin", "A"},
                    {"cubins/b.sm_90.cubin", "B1"},
                    {"include/kiln/kiln_all.h", "all 1"},
                    {"lib/libkiln.a", "lib 1"}};
const Files kNew = {{"metadata.json", "new"},
                    {"cubins/a.sm_90.cubin", "A"},
                    {"cubins/b.sm_90.cubin", "B2"},
                    {"include/kiln/kiln_all.h", "all 2"},
                    {"lib/libkiln.a", "lib 2"}};

BuildProcess process(int pid, std::set<long> running = {}) {
  return {pid, [running](long other) { return running.count(other) != 0; }};
}

// runBuild's calls to publish.h, in its order.
Result<void> build(io::FileSystem& files, const BuildProcess& self) {
  if (auto r = restoreSetAside(files, kArtifact, self); !r) return r;
  StagedArtifact staged(files, kArtifact, self);
  if (auto r = staged.open(); !r) return r;
  if (auto r = staged.write({{"cubins/b.sm_90.cubin", "B2"}}); !r) return r;  // nvcc
  ImageRecord kept;
  kept.sm = 90;
  kept.cubin = "cubins/a.sm_90.cubin";
  kept.sha256 = io::sha256Hex("A");
  if (auto bytes = staged.keep(kept); !bytes) return bytes.failure();
  if (auto r = staged.write({{"include/kiln/kiln_all.h", "all 2"}, {".src/b.cpp", "shim"}}); !r)
    return r;
  // The host compiler and ar.
  if (auto r = staged.write({{".obj/b.o", "object"}, {"lib/libkiln.a", "lib 2"}}); !r) return r;
  if (auto r = staged.complete("new"); !r) return r;
  return staged.publish();
}

// A filesystem that holds the previous artifact.
struct Disk {
  Disk() {
    for (const auto& [path, bytes] : kOld) EXPECT_TRUE(files.writeFile(kArtifact / path, bytes));
  }
  Files artifact() const { return files.snapshot(kArtifact); }
  // What is next to the artifact besides it.
  std::vector<std::string> leftovers() {
    std::vector<std::string> names = files.list(kArtifacts);
    std::erase(names, "sm_90");
    return names;
  }

  FakeFileSystem files;
};

int stepsOfABuild() {
  Disk disk;
  const int before = disk.files.steps();
  EXPECT_TRUE(build(disk.files, process(100)));
  return disk.files.steps() - before;
}

TEST(PublishTest, PublishesTheStagedArtifactAndRemovesTheSetAsideOne) {
  Disk disk;
  auto r = build(disk.files, process(100));
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(disk.artifact(), kNew);  // without the scratch folders
  EXPECT_EQ(disk.leftovers(), std::vector<std::string>{});
}

TEST(PublishTest, AKilledBuildLeavesAnArtifactWholeAndTheNextBuildCleansUp) {
  // 0-7 create the staging directory, 8-16 write into it, 17 set the previous artifact
  // aside, 18 rename the staging directory into place, 19 remove the set-aside copy.
  const int steps = stepsOfABuild();
  ASSERT_EQ(steps, 20);
  const int rename_into_place = 18;
  for (int step = 0; step < steps; ++step) {
    SCOPED_TRACE("killed at step " + std::to_string(step));
    Disk disk;
    disk.files.crashAtStep(step);
    (void)build(disk.files, process(100));
    disk.files.restart();
    // Killed between the two renames, the artifact's path is empty and the previous artifact is
    // set aside: the next build puts it back first.
    ASSERT_TRUE(restoreSetAside(disk.files, kArtifact, process(200)));
    const Files left = disk.artifact();
    EXPECT_TRUE(left == kOld || left == kNew) << "half an artifact: " << left.size() << " files";
    EXPECT_EQ(left == kNew, step > rename_into_place);
    auto next = build(disk.files, process(200));
    ASSERT_TRUE(next) << next.error();
    EXPECT_EQ(disk.artifact(), kNew);
    EXPECT_EQ(disk.leftovers(), std::vector<std::string>{});
  }
}

TEST(PublishTest, AFailedStepLeavesThePreviousArtifactAndTheNextBuildCleansUp) {
  const int steps = stepsOfABuild();
  for (int step = 0; step < steps; ++step) {
    SCOPED_TRACE("failed at step " + std::to_string(step));
    Disk disk;
    disk.files.failStep(step);
    auto r = build(disk.files, process(100));
    if (r) {
      // A step whose failure does not matter: removing a leftover or the set-aside copy.
      EXPECT_EQ(disk.artifact(), kNew);
    } else {
      EXPECT_EQ(disk.artifact(), kOld);
      EXPECT_NE(r.error().find(kArtifacts.string()), std::string::npos) << r.error();
      EXPECT_EQ(disk.leftovers(), std::vector<std::string>{});
    }
    auto next = build(disk.files, process(200));
    ASSERT_TRUE(next) << next.error();
    EXPECT_EQ(disk.artifact(), kNew);
    EXPECT_EQ(disk.leftovers(), std::vector<std::string>{});
  }
}

TEST(PublishTest, AFailedRenameIntoPlaceKeepsThePreviousArtifact) {
  Disk disk;
  const fs::path staging = stagingDir(kArtifact, 100);
  EXPECT_EQ(staging, kArtifacts / ".sm_90.staging-100");
  disk.files.failRenamesOf(staging);
  auto r = build(disk.files, process(100));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.errorKind(), ErrorKind::kFailure);
  EXPECT_EQ(r.error(), "cannot rename " + staging.string() + " to " + kArtifact.string() +
                           ": Permission denied");
  EXPECT_EQ(disk.artifact(), kOld);
  EXPECT_EQ(disk.leftovers(), std::vector<std::string>{});
}

TEST(PublishTest, AFailedRenameAsideKeepsThePreviousArtifact) {
  Disk disk;
  disk.files.failRenamesOf(kArtifact);
  auto r = build(disk.files, process(100));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.errorKind(), ErrorKind::kFailure);
  EXPECT_EQ(r.error(), "cannot move " + kArtifact.string() + " aside: Permission denied");
  EXPECT_EQ(disk.artifact(), kOld);
  EXPECT_EQ(disk.leftovers(), std::vector<std::string>{});
}

// Neither into place nor back: the error says where the previous artifact is, and the next build
// puts it back before it reads it.
TEST(PublishTest, WhenNeitherRenameWorksTheNextBuildPutsThePreviousArtifactBack) {
  Disk disk;
  const fs::path aside = setAsideDir(kArtifact, 100);
  EXPECT_EQ(aside, kArtifacts / ".sm_90.old-100");
  disk.files.failRenamesOf(stagingDir(kArtifact, 100));
  disk.files.failRenamesOf(aside);
  auto r = build(disk.files, process(100));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("; the previous artifact is left at " + aside.string()),
            std::string::npos)
      << r.error();
  EXPECT_FALSE(disk.files.exists(kArtifact));
  EXPECT_EQ(disk.files.snapshot(aside), kOld);

  disk.files.restart();
  ASSERT_TRUE(restoreSetAside(disk.files, kArtifact, process(200)));
  EXPECT_EQ(disk.artifact(), kOld);
  EXPECT_EQ(disk.leftovers(), std::vector<std::string>{});
}

TEST(PublishTest, AModifiedImageRefusesTheMerge) {
  Disk disk;
  ASSERT_TRUE(disk.files.writeFile(kArtifact / "cubins/a.sm_90.cubin", "tampered"));
  const Files before = disk.artifact();
  auto r = build(disk.files, process(100));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.errorKind(), ErrorKind::kUsage);
  EXPECT_EQ(r.error(), (kArtifact / "cubins/a.sm_90.cubin").string() + ": sha256 " +
                           io::sha256Hex("tampered") + " differs from its metadata.json (" +
                           io::sha256Hex("A") +
                           "); the old artifact was modified; re-run with --clean");
  EXPECT_EQ(disk.artifact(), before);
  EXPECT_EQ(disk.leftovers(), std::vector<std::string>{});
}

// Only this tag's staging and set-aside directories of processes that are gone are removed.
TEST(PublishTest, LeftoversOfRunningBuildsAndOtherTagsAreLeftAlone) {
  Disk disk;
  for (const char* dir : {".sm_90.staging-300", ".sm_90.staging-400", ".sm_90.old-400",
                          ".sm_80.staging-400", ".sm_90.staging-4x", ".sm_90.staging-"}) {
    ASSERT_FALSE(disk.files.createDirectories(kArtifacts / dir));
  }
  auto r = build(disk.files, process(100, /*running=*/{300}));
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(disk.artifact(), kNew);
  EXPECT_EQ(disk.leftovers(),
            (std::vector<std::string>{".sm_80.staging-400", ".sm_90.staging-", ".sm_90.staging-300",
                                      ".sm_90.staging-4x"}));
}

// A set-aside artifact is put back only where the artifact's path is empty, and only when the
// build that set it aside is gone.
TEST(PublishTest, RestoreSetAsideOnlyFillsAnEmptyPathFromABuildThatIsGone) {
  Disk disk;
  const fs::path aside = setAsideDir(kArtifact, 300);
  ASSERT_TRUE(disk.files.writeFile(aside / "metadata.json", "older"));
  ASSERT_TRUE(restoreSetAside(disk.files, kArtifact, process(100)));
  EXPECT_EQ(disk.artifact(), kOld);  // the artifact is there: nothing to put back

  ASSERT_FALSE(disk.files.rename(kArtifact, kArtifacts / "elsewhere"));
  ASSERT_TRUE(restoreSetAside(disk.files, kArtifact, process(100, /*running=*/{300})));
  EXPECT_FALSE(disk.files.exists(kArtifact));  // the build that set it aside still runs

  ASSERT_TRUE(restoreSetAside(disk.files, kArtifact, process(100)));
  EXPECT_EQ(disk.artifact(), (Files{{"metadata.json", "older"}}));
  EXPECT_FALSE(disk.files.exists(aside));
}

}  // namespace
}  // namespace kiln::core
