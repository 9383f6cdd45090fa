// The release matrix: parser, registry check, coverage gate, size report and the run behind
// `kiln package --matrix` (see matrix.h for why each exists; docs/packaging.md for the format).
//
// Parsing follows registry.cpp: strict keys, every error "<file>:<line>: <rule broken>" pointing
// at the offending key or value, because the matrix is edited by hand at release time.
#include "core/matrix.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <toml++/toml.h>
#include <algorithm>
#include <map>
#include <regex>
#include <set>

#include "core/naming.h"
#include "core/table.h"
#include "core/toolchain.h"
#include "io/fs.h"

namespace kiln::core {

namespace fs = std::filesystem;

namespace {

const std::set<std::string> kTopLevelKeys = {"entry"};
const std::set<std::string> kEntryKeys = {"arch", "gpu_archs", "kernels", "description", "cuda"};
const std::set<std::string> kArchs = {"x86_64", "aarch64"};

int lineOf(const toml::node& n) {
  return static_cast<int>(n.source().begin.line);
}

class MatrixParser {
 public:
  explicit MatrixParser(std::string display) : display_(std::move(display)) {}

  Result<ReleaseMatrix> parse(std::string_view text) {
    toml::table root;
    try {
      root = toml::parse(text, display_);
    } catch (const toml::parse_error& e) {
      return fail(static_cast<int>(e.source().begin.line),
                  fmt::format("invalid TOML: {}", e.description()));
    }
    for (const auto& [key, value] : root) {
      if (!kTopLevelKeys.count(std::string(key.str())))
        return fail(
            lineOf(value),
            fmt::format("unknown key '{}' at the top level (allowed: [[entry]])", key.str()));
    }
    ReleaseMatrix matrix;
    matrix.file = display_;
    const toml::node* entries = root.get("entry");
    if (entries == nullptr) return fail(1, "the matrix lists no [[entry]]");
    const toml::array* array = entries->as_array();
    if (array == nullptr || !array->is_array_of_tables())
      return fail(lineOf(*entries), "'entry' must be an array of tables ([[entry]])");
    std::map<std::string, int> seen;  // id -> line
    for (const auto& node : *array) {
      MatrixEntry entry;
      if (!parseEntry(*node.as_table(), entry)) return failure();
      auto [it, inserted] = seen.emplace(entry.id(), entry.line);
      if (!inserted)
        return fail(
            entry.line,
            fmt::format("duplicate entry {} (first at line {}); each (arch, gpu_archs, cuda) is "
                        "one tarball",
                        entry.id(), it->second));
      matrix.entries.push_back(std::move(entry));
    }
    if (matrix.entries.empty()) return fail(lineOf(*entries), "the matrix lists no [[entry]]");
    return matrix;
  }

 private:
  Error failure() const { return makeError(error_, ErrorKind::kUsage); }
  Error fail(int at, const std::string& rule) {
    error_ = fmt::format("{}:{}: {}", display_, at, rule);
    return failure();
  }
  bool failed(int at, const std::string& rule) {
    (void)fail(at, rule);
    return false;
  }

  bool parseEntry(const toml::table& t, MatrixEntry& entry) {
    entry.line = lineOf(t);
    for (const auto& [key, value] : t) {
      if (!kEntryKeys.count(std::string(key.str())))
        return failed(lineOf(value), fmt::format("unknown key '{}' in [[entry]] (allowed: {})",
                                                 key.str(), fmt::join(kEntryKeys, ", ")));
    }
    // arch
    const toml::node* arch = t.get("arch");
    if (arch == nullptr)
      return failed(entry.line, "[[entry]] misses required key 'arch' (x86_64 or aarch64)");
    if (!arch->is_string() || !kArchs.count(arch->as_string()->get()))
      return failed(lineOf(*arch),
                    fmt::format("arch {} is not one of x86_64, aarch64", describe(*arch)));
    entry.arch = arch->as_string()->get();
    // gpu_archs
    const toml::node* archs = t.get("gpu_archs");
    if (archs == nullptr)
      return failed(entry.line, "[[entry]] misses required key 'gpu_archs' ([\"sm_90\", ...])");
    const toml::array* list = archs->as_array();
    if (list == nullptr || list->empty())
      return failed(lineOf(*archs),
                    "'gpu_archs' must be a non-empty array of SMs such as [\"sm_87\", \"sm_90\"]");
    static const std::regex kSm("sm_([1-9][0-9]{1,2})");
    for (const auto& e : *list) {
      std::smatch m;
      const std::string text = e.is_string() ? e.as_string()->get() : std::string();
      if (!e.is_string() || !std::regex_match(text, m, kSm))
        return failed(
            lineOf(e),
            fmt::format("gpu_archs entry {} is not an SM of the form sm_NN (sm_90); the 'a' "
                        "targets come from each group's kiln.toml",
                        describe(e)));
      const int sm = std::stoi(m[1].str());
      if (std::find(entry.sms.begin(), entry.sms.end(), sm) != entry.sms.end())
        return failed(lineOf(e), fmt::format("gpu_archs lists sm_{} twice", sm));
      entry.sms.push_back(sm);
    }
    // The tag orders SMs ascending whatever the order here, as `kiln build` does.
    std::sort(entry.sms.begin(), entry.sms.end());
    // kernels
    const toml::node* kernels = t.get("kernels");
    if (kernels == nullptr)
      return failed(entry.line,
                    "[[entry]] misses required key 'kernels' (\"ALL\" or a list of groups)");
    if (kernels->is_string()) {
      if (kernels->as_string()->get() != "ALL")
        return failed(lineOf(*kernels),
                      fmt::format("kernels {} must be \"ALL\" or an array of group names",
                                  describe(*kernels)));
    } else if (const toml::array* groups = kernels->as_array()) {
      if (groups->empty())
        return failed(lineOf(*kernels), "kernels is an empty array; list groups or write \"ALL\"");
      static const std::regex kGroup("[a-z][a-z0-9]*");
      for (const auto& g : *groups) {
        const std::string name = g.is_string() ? g.as_string()->get() : std::string();
        if (!g.is_string() || !std::regex_match(name, kGroup))
          return failed(
              lineOf(g),
              fmt::format("kernels entry {} is not a group name ([a-z][a-z0-9]*)", describe(g)));
        if (std::find(entry.kernels.begin(), entry.kernels.end(), name) != entry.kernels.end())
          return failed(lineOf(g), fmt::format("kernels lists group '{}' twice", name));
        entry.kernels.push_back(name);
      }
    } else {
      return failed(
          lineOf(*kernels),
          fmt::format("kernels {} must be \"ALL\" or an array of group names", describe(*kernels)));
    }
    // cuda
    if (const toml::node* c = t.get("cuda")) {
      const bool known =
          c->is_integer() && std::find(std::begin(kCudaMajors), std::end(kCudaMajors),
                                       c->as_integer()->get()) != std::end(kCudaMajors);
      if (!known)
        return failed(lineOf(*c), fmt::format("cuda {} must be a CUDA major kiln builds with: {}",
                                              describe(*c), fmt::join(kCudaMajors, " or ")));
      entry.cuda = static_cast<int>(c->as_integer()->get());
    }
    // description
    if (const toml::node* d = t.get("description")) {
      if (!d->is_string()) return failed(lineOf(*d), "'description' must be a string");
      entry.description = d->as_string()->get();
    }
    return true;
  }

  static std::string describe(const toml::node& n) {
    if (n.is_string()) return fmt::format("\"{}\"", n.as_string()->get());
    if (n.is_integer()) return fmt::format("{}", n.as_integer()->get());
    if (n.is_boolean()) return n.as_boolean()->get() ? "true" : "false";
    if (n.is_floating_point()) return fmt::format("{}", n.as_floating_point()->get());
    if (n.is_array()) return "(an array)";
    if (n.is_table()) return "(a table)";
    return "(another type)";
  }

  std::string display_;
  std::string error_;
};

std::string smList(const std::vector<int>& sms) {
  std::vector<std::string> names;
  for (int sm : sms) names.push_back(fmt::format("sm_{}", sm));
  return fmt::format("{}", fmt::join(names, ", "));
}

bool contains(const std::vector<int>& v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

}  // namespace

// ---- entries -----------------------------------------------------------------------------------

std::string MatrixEntry::tag() const {
  std::vector<std::string> parts;
  for (int sm : sms) parts.push_back(fmt::format("sm_{}", sm));
  return fmt::format("{}", fmt::join(parts, "_"));
}
std::string MatrixEntry::id() const {
  const std::string sub = artifactsSubdir();
  return arch + "/" + tag() + (sub.empty() ? "" : "/" + sub);
}
std::string MatrixEntry::artifactsSubdir() const {
  return cuda == kDefaultCudaMajor ? std::string() : fmt::format("cuda{}", cuda);
}
std::string MatrixEntry::kernelsText() const {
  return kernels.empty() ? std::string("ALL") : fmt::format("{}", fmt::join(kernels, ","));
}
std::string MatrixEntry::gpuArchText() const {
  std::vector<std::string> parts;
  for (int sm : sms) parts.push_back(fmt::format("sm_{}", sm));
  return fmt::format("{}", fmt::join(parts, ","));
}

Result<ReleaseMatrix> parseMatrix(std::string_view text, const std::string& display) {
  return MatrixParser(display).parse(text);
}

Result<ReleaseMatrix> loadMatrix(const fs::path& file) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec))
    return makeError(
        fmt::format("matrix file {} does not exist (see docs/packaging.md, \"Release matrix\")",
                    file.string()),
        ErrorKind::kUsage);
  auto text = io::readFile(file);
  if (!text) return makeError(text.error(), ErrorKind::kUsage);
  return parseMatrix(*text, file.string());
}

Result<std::vector<MatrixEntry>> selectEntries(const ReleaseMatrix& matrix,
                                               const std::string& filter) {
  if (filter.empty()) return matrix.entries;
  std::set<std::string> wanted;
  std::vector<std::string> ids;
  for (const auto& e : matrix.entries) ids.push_back(e.id());
  size_t start = 0;
  while (start <= filter.size()) {
    const size_t comma = std::min(filter.find(',', start), filter.size());
    const std::string id = filter.substr(start, comma - start);
    if (std::find(ids.begin(), ids.end(), id) == ids.end())
      return makeError(fmt::format("--entries: '{}' is not an entry of {}; its entries are {}", id,
                                   matrix.file, fmt::join(ids, ", ")),
                       ErrorKind::kUsage);
    wanted.insert(id);
    start = comma + 1;
  }
  std::vector<MatrixEntry> out;
  for (const auto& e : matrix.entries) {
    if (wanted.count(e.id())) out.push_back(e);
  }
  return out;
}

std::vector<const Group*> entryGroups(const MatrixEntry& entry, const Registry& registry) {
  std::vector<const Group*> groups;
  for (const auto& g : registry.groups) {
    if (entry.kernels.empty() ||
        std::find(entry.kernels.begin(), entry.kernels.end(), g.name) != entry.kernels.end())
      groups.push_back(&g);
  }
  return groups;
}

Result<void> checkMatrixAgainstRegistry(const ReleaseMatrix& matrix, const Registry& registry) {
  std::vector<std::string> known;
  for (const auto& g : registry.groups) known.push_back(g.name);
  for (const auto& entry : matrix.entries) {
    for (const auto& name : entry.kernels) {
      if (registry.findGroup(name) == nullptr)
        return makeError(
            fmt::format("{}:{}: entry {}: unknown group '{}'; known groups: {}", matrix.file,
                        entry.line, entry.id(), name, fmt::join(known, ", ")),
            ErrorKind::kUsage);
    }
    const auto groups = entryGroups(entry, registry);
    for (int sm : entry.sms) {
      bool promised = false;
      for (const Group* g : groups) {
        for (const auto& v : g->variants) promised = promised || contains(v.supported_sms, sm);
      }
      if (!promised)
        return makeError(
            fmt::format(
                "{}:{}: entry {}: no variant of its groups ({}) supports sm_{}, so the tarball "
                "would ship sm_{} with nothing in it",
                matrix.file, entry.line, entry.id(), entry.kernelsText(), sm, sm),
            ErrorKind::kUsage);
    }
  }
  return {};
}

// ---- coverage gate -----------------------------------------------------------------------------

std::vector<CoverageGap> coverageGaps(const MatrixEntry& entry, const Registry& registry,
                                      const ArtifactMetadata& metadata) {
  std::vector<CoverageGap> gaps;
  const Provenance& p = metadata.provenance;
  if (p.arch != entry.arch)
    gaps.push_back({"", "", 0,
                    fmt::format("entry {}: the artifact's arch is {}, expected {}", entry.id(),
                                p.arch, entry.arch)});
  // The matrix ships cubins: an entry's SMs are sm_NN, never compute_NN.
  const std::vector<GpuArch> expected(entry.sms.begin(), entry.sms.end());
  if (p.gpu_archs != expected) {
    std::vector<std::string> names;
    for (const GpuArch& arch : p.gpu_archs) names.push_back(gpuArchName(arch));
    gaps.push_back({"", "", 0,
                    fmt::format("entry {}: the artifact's SMs are {}, expected {}", entry.id(),
                                fmt::join(names, ", "), smList(entry.sms))});
  }
  const auto groups = entryGroups(entry, registry);
  for (const Group* g : groups) {
    const std::string toml = fs::relative(g->toml, registry.root).string();
    for (const auto& v : g->variants) {
      for (int sm : entry.sms) {
        if (!contains(v.supported_sms, sm)) continue;
        auto it = metadata.variants.find(v.name);
        if (it != metadata.variants.end() && it->second.images.count(sm)) continue;
        gaps.push_back(
            {g->name, v.name, sm,
             fmt::format("entry {}: variant {} (group {}) is missing for sm_{}, which {} promises "
                         "(supported_sms {})",
                         entry.id(), v.name, g->name, sm, toml, smList(v.supported_sms))});
      }
    }
  }
  for (const auto& [name, record] : metadata.groups) {
    (void)record;
    if (std::none_of(groups.begin(), groups.end(), [&](const Group* g) { return g->name == name; }))
      gaps.push_back(
          {name, "", 0,
           fmt::format("entry {}: the artifact holds group {}, which the entry's kernels ({}) "
                       "do not include",
                       entry.id(), name, entry.kernelsText())});
  }
  return gaps;
}

Result<void> checkCoverage(const MatrixEntry& entry, const Registry& registry,
                           const ArtifactMetadata& metadata) {
  const auto gaps = coverageGaps(entry, registry, metadata);
  if (gaps.empty()) return {};
  std::vector<std::string> lines;
  for (const auto& gap : gaps) lines.push_back(gap.problem);
  return makeError(fmt::format("coverage gate failed ({} problem{}):\n  {}", gaps.size(),
                               gaps.size() == 1 ? "" : "s", fmt::join(lines, "\n  ")));
}

// ---- size report -------------------------------------------------------------------------------

SizeReport sizeReport(const ArtifactMetadata& metadata, std::uint64_t library_bytes,
                      const std::vector<ArMember>& members, std::uint64_t tarball_bytes) {
  SizeReport report;
  report.library_bytes = library_bytes;
  report.tarball_bytes = tarball_bytes;
  std::map<std::string, std::uint64_t> member_bytes;
  for (const auto& m : members) member_bytes[m.name] += m.data.size();
  std::uint64_t variant_members = 0;
  std::map<int, SmSize> sms;
  for (const auto& [name, v] : metadata.variants) {  // std::map: by name
    VariantSize vs{name, 0, 0, 0};
    if (auto it = member_bytes.find(name + ".o"); it != member_bytes.end())
      vs.library += it->second;
    for (const auto& [sm, image] : v.images) {
      ImageSize is{name, sm, image.size, 0};
      if (auto it = member_bytes.find(imageStem(name, sm, image.isPtx()) + ".o");
          it != member_bytes.end())
        is.object = it->second;
      vs.sms += 1;
      vs.cubin += is.cubin;
      vs.library += is.object;
      SmSize& s = sms[sm];
      s.sm = sm;
      s.variants += 1;
      s.cubin += is.cubin;
      s.library += is.object;
      report.cubin_total += is.cubin;
      report.images.push_back(is);
    }
    variant_members += vs.library;
    report.variants.push_back(vs);
  }
  for (const auto& [sm, s] : sms) report.sms.push_back(s);
  std::uint64_t all_members = 0;
  for (const auto& [name, bytes] : member_bytes) all_members += bytes;
  report.shared_bytes = all_members - std::min(all_members, variant_members);
  return report;
}

Result<SizeReport> sizeReportFor(const fs::path& artifact_dir, const ArtifactMetadata& metadata,
                                 std::uint64_t tarball_bytes) {
  const fs::path library = artifact_dir / metadata.library.path;
  auto bytes = io::readFile(library);
  if (!bytes) return bytes.failure();
  auto members = readArArchive(*bytes, library.string());
  if (!members) return members.failure();
  return sizeReport(metadata, bytes->size(), *members, tarball_bytes);
}

std::string renderSizeReport(const SizeReport& r) {
  TextTable images({"variant", "SM", "cubin", "library"});
  for (const auto& i : r.images)
    images.add({i.variant, fmt::format("sm_{}", i.sm), humanBytes(i.cubin), humanBytes(i.object)});
  TextTable variants({"variant", "SMs", "cubin", "library"});
  for (const auto& v : r.variants)
    variants.add({v.variant, std::to_string(v.sms), humanBytes(v.cubin), humanBytes(v.library)});
  TextTable sms({"SM", "variants", "cubin", "library"});
  for (const auto& s : r.sms)
    sms.add({fmt::format("sm_{}", s.sm), std::to_string(s.variants), humanBytes(s.cubin),
             humanBytes(s.library)});
  return fmt::format(
      "per variant and SM (library: the member embedding that cubin):\n{}\nper variant (library: "
      "its "
      "images and its shim):\n{}\nper SM:\n{}\ntotal: cubins {}, library {} (runtime, runners and "
      "tables {}), tarball {}\n",
      images.render(), variants.render(), sms.render(), humanBytes(r.cubin_total),
      humanBytes(r.library_bytes), humanBytes(r.shared_bytes), humanBytes(r.tarball_bytes));
}

// ---- the run -----------------------------------------------------------------------------------

namespace {

// One entry: build, gate, package, verify, sizes. The first failure ends the entry.
void runEntry(const MatrixOptions& options, const fs::path& output_dir, const fs::path& dist_dir,
              const Registry& registry, io::ProcessRunner& runner, MatrixSink& sink,
              EntryOutcome& out) {
  const MatrixEntry& entry = out.entry;
  auto fail = [&](const Error& e, const std::string& stage) {
    out.ok = false;
    out.error = Error{fmt::format("entry {}: {}: {}", entry.id(), stage, e.message), e.kind};
  };
  const fs::path artifacts_root = output_dir / entry.artifactsSubdir();
  out.artifact_dir = artifacts_root / entry.arch / entry.tag();
  ArtifactMetadata metadata;
  if (!options.no_build) {
    BuildOptions build = options.build;
    build.cuda_major = entry.cuda;
    build.gpu_arch = entry.gpuArchText();
    build.arch = entry.arch;
    build.kernels = entry.kernelsText();
    build.clean = true;
    build.output_dir = artifacts_root.lexically_normal();
    auto built = runBuild(build, runner, sink);
    if (!built) return fail(built.failure(), "build");
    out.artifact_dir = built->artifact_dir;
    metadata = built->metadata;
  } else {
    auto text = io::readFile(out.artifact_dir / kMetadataFile);
    if (!text)
      return fail(makeError(fmt::format("{} has no metadata.json; build it or drop --no-build",
                                        out.artifact_dir.string())),
                  "artifact");
    auto parsed = parseMetadata(*text);
    if (!parsed) return fail(parsed.failure(), "artifact");
    metadata = *parsed;
  }
  if (auto major = cudaMajor(metadata.provenance.cuda_version); !major || *major != entry.cuda) {
    return fail(makeError(fmt::format("the artifact was built with CUDA {}, the entry is cuda {}",
                                      metadata.provenance.cuda_version, entry.cuda)),
                "artifact");
  }
  // The gate runs before packaging, so an entry that fails it never leaves a new tarball in dist.
  if (auto gate = checkCoverage(entry, registry, metadata); !gate)
    return fail(gate.failure(), "coverage");
  auto package = packageArtifact(out.artifact_dir, dist_dir);
  if (!package) return fail(package.failure(), "package");
  out.package = *package;
  auto verified = verifyTarball(package->tarball);
  if (!verified) return fail(verified.failure(), "verify");
  out.tarball_report = *verified;
  auto sizes = sizeReportFor(out.artifact_dir, metadata, package->size);
  if (!sizes) return fail(sizes.failure(), "size report");
  out.sizes = *sizes;
  out.ok = true;
}

}  // namespace

Result<std::vector<EntryOutcome>> runMatrix(const MatrixOptions& options, io::ProcessRunner& runner,
                                            MatrixSink& sink) {
  const fs::path root = fs::absolute(options.build.root).lexically_normal();
  const fs::path matrix_file =
      options.matrix_file.empty() ? root / "packaging" / "matrix.toml" : options.matrix_file;
  auto matrix = loadMatrix(matrix_file);
  if (!matrix) return matrix.failure();
  auto selected = selectEntries(*matrix, options.entries);
  if (!selected) return selected.failure();
  // The registry without nvcc's SM list: the builder checks nvcc per entry, and --no-build needs
  // no nvcc at all.
  auto registry = loadRegistry(root, {});
  if (!registry) return registry.failure();
  if (auto r = checkMatrixAgainstRegistry(*matrix, *registry); !r) return r.failure();

  const fs::path output_dir =
      options.build.output_dir.empty() ? root / "artifacts" : options.build.output_dir;
  const fs::path dist_dir = options.dist_dir.empty() ? root / "dist" : options.dist_dir;
  std::vector<EntryOutcome> outcomes;
  const int total = static_cast<int>(selected->size());
  for (int i = 0; i < total; ++i) {
    EntryOutcome outcome;
    outcome.entry = (*selected)[static_cast<size_t>(i)];
    sink.entryStarted(outcome.entry, i + 1, total);
    runEntry(options, output_dir, dist_dir, *registry, runner, sink, outcome);
    sink.entryFinished(outcome);
    outcomes.push_back(std::move(outcome));
  }
  return outcomes;
}

std::string matrixSummaryTable(const std::vector<EntryOutcome>& outcomes) {
  TextTable table({"entry", "kernels", "variants", "cubins", "library", "tarball", "result"});
  for (const auto& o : outcomes) {
    if (o.ok) {
      table.add(
          {o.entry.id(), o.entry.kernelsText(), std::to_string(o.sizes.variants.size()),
           humanBytes(o.sizes.cubin_total), humanBytes(o.sizes.library_bytes),
           fmt::format("{} {}", o.package.tarball.filename().string(), humanBytes(o.package.size)),
           "ok"});
    } else {
      table.add({o.entry.id(), o.entry.kernelsText(), "-", "-", "-", "-", "FAILED"});
    }
  }
  return table.render();
}

}  // namespace kiln::core
