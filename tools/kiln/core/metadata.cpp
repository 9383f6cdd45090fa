// metadata.json mapping. Written with nlohmann::ordered_json so constants keep their kiln.toml
// order across a write/read round trip (the generated group table depends on that order).
#include "core/metadata.h"

#include <algorithm>
#include <ctime>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/naming.h"
#include "io/fs.h"

namespace kiln::core {

using Json = nlohmann::ordered_json;

namespace {

Json constantJson(const Constant& constant) {
  switch (constant.type) {
    case ConstantType::kInt:
      return std::get<std::int64_t>(constant.value);
    case ConstantType::kBool:
      return std::get<bool>(constant.value);
    default:
      return std::get<std::string>(constant.value);
  }
}

Json kernelJson(const KernelResources& k) {
  return Json{{"registers", k.registers},
              {"shared_bytes", k.shared_bytes},
              {"stack_bytes", k.stack_bytes},
              {"spill_store_bytes", k.spill_store_bytes},
              {"spill_load_bytes", k.spill_load_bytes}};
}

// A SAX pass that builds nothing and stops at the first container deeper than kMaxJsonDepth or
// the first key an object repeats. nlohmann's parser is iterative, but copying or building a DOM
// of a deep document recurses (an ordered_json object that grows copies its members), so depth is
// checked before that; and a DOM keeps the last of two equal keys, so a repeated key (say
// "schema_version": 2 then 1) must be refused here, where both are still seen.
struct ShapeCheck {
  using number_integer_t = Json::number_integer_t;
  using number_unsigned_t = Json::number_unsigned_t;
  using number_float_t = Json::number_float_t;
  using string_t = Json::string_t;
  using binary_t = Json::binary_t;

  int depth = 0;
  bool too_deep = false;
  std::string duplicate_key;  // the first key an object repeats
  std::string error;
  // Per open container, the keys seen so far (arrays keep theirs empty).
  std::vector<std::set<std::string>> keys;

  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(number_integer_t) { return true; }
  bool number_unsigned(number_unsigned_t) { return true; }
  bool number_float(number_float_t, const string_t&) { return true; }
  bool string(string_t&) { return true; }
  bool binary(binary_t&) { return true; }
  bool key(string_t& k) {
    if (!keys.empty() && !keys.back().insert(k).second) {
      duplicate_key = k;
      return false;
    }
    return true;
  }
  bool start_object(std::size_t) { return enter(); }
  bool end_object() { return leave(); }
  bool start_array(std::size_t) { return enter(); }
  bool end_array() { return leave(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    error = e.what();
    return false;
  }

 private:
  bool enter() {
    if (++depth > kMaxJsonDepth) too_deep = true;
    if (!too_deep) keys.emplace_back();
    return !too_deep;
  }
  bool leave() {
    --depth;
    if (!keys.empty()) keys.pop_back();
    return true;
  }
};

}  // namespace

std::string constantLiteral(const Constant& constant) {
  switch (constant.type) {
    case ConstantType::kInt:
      return std::to_string(std::get<std::int64_t>(constant.value));
    case ConstantType::kBool:
      return std::get<bool>(constant.value) ? "true" : "false";
    default:
      return "\"" + std::get<std::string>(constant.value) + "\"";
  }
}

std::string toJson(const ArtifactMetadata& m) {
  const Provenance& p = m.provenance;
  Json j;
  j["schema_version"] = m.schema_version;
  j["kiln_version"] = p.kiln_version;
  j["arch"] = p.arch;
  j["host_target"] = p.host_target;
  j["tag"] = p.tag;
  Json archs = Json::array();
  for (const GpuArch& arch : p.gpu_archs) archs.push_back(gpuArchName(arch));
  j["gpu_archs"] = archs;
  j["compile_targets"] = p.compile_targets;
  j["cuda_version"] = p.cuda_version;
  if (p.cuda_frontend_version) j["cuda_frontend_version"] = *p.cuda_frontend_version;
  j["host_compiler"] = {{"command", p.host_compiler_command}, {"version", p.host_compiler_version}};
  j["cutlass_version"] = p.cutlass_version ? Json(*p.cutlass_version) : Json(nullptr);
  if (p.cute_dsl_version) j["cute_dsl_version"] = *p.cute_dsl_version;
  if (p.cute_dsl_cuda) j["cute_dsl_cuda"] = *p.cute_dsl_cuda;
  j["build_date"] = m.build_date;
  j["library"] = {{"path", m.library.path}, {"sha256", m.library.sha256}, {"size", m.library.size}};
  j["doctor"] = {{"path", m.doctor.path}, {"sha256", m.doctor.sha256}, {"size", m.doctor.size}};
  j["headers"] = m.headers;
  j["fingerprint"] = m.fingerprint;
  j["runtime_inputs"] = m.runtime_inputs;
  Json groups = Json::object();
  for (const auto& [name, g] : m.groups) {
    groups[name] = {{"kind", g.kind}, {"supported_sms", g.supported_sms}, {"variants", g.variants}};
  }
  j["groups"] = groups;
  Json variants = Json::object();
  for (const auto& [name, v] : m.variants) {
    Json constants = Json::object();
    for (const auto& c : v.constants) constants[c.name] = constantJson(c);
    Json sms = Json::object();
    for (const auto& [sm, image] : v.images) {
      Json kernels = Json::object();
      for (const auto& [entry, k] : image.kernels) kernels[entry] = kernelJson(k);
      sms[std::to_string(sm)] = {{"target", image.target},
                                 {"format", image.format},
                                 {"symbol", image.symbol},
                                 {"cubin", image.cubin},
                                 {"sha256", image.sha256},
                                 {"size", image.size},
                                 {"compile_seconds", image.compile_seconds},
                                 {"command", image.command},
                                 {"kernels", kernels}};
    }
    variants[name] = {{"group", v.group},
                      {"kind", v.kind},
                      {"object", v.name},
                      {"header", fmt::format("include/kiln/variants/{}.h", v.name)},
                      {"entries", v.entries},
                      {"constants", constants},
                      {"inputs", v.inputs},
                      {"fingerprint", v.fingerprint},
                      {"sms", sms}};
  }
  j["variants"] = variants;
  return j.dump(2) + "\n";
}

Result<ArtifactMetadata> parseMetadata(const std::string& json_text) {
  if (json_text.size() > kMaxMetadataBytes) {
    return makeError(fmt::format("metadata.json is {} bytes, more than the limit of {} bytes",
                                 json_text.size(), kMaxMetadataBytes));
  }
  {
    ShapeCheck check;
    Json::sax_parse(json_text, &check);
    if (check.too_deep) {
      return makeError(fmt::format("metadata.json nests more than {} levels deep (the limit is {})",
                                   kMaxJsonDepth, kMaxJsonDepth));
    }
    if (!check.duplicate_key.empty()) {
      return makeError(
          fmt::format("metadata.json repeats the key \"{}\" in one object", check.duplicate_key));
    }
    if (!check.error.empty())
      return makeError(fmt::format("metadata.json is not valid JSON: {}", check.error));
  }
  Json j;
  try {
    j = Json::parse(json_text);
  } catch (const std::exception& e) {
    return makeError(fmt::format("metadata.json is not valid JSON: {}", e.what()));
  }
  ArtifactMetadata m;
  std::string field;
  try {
    field = "schema_version";
    // Exactly the integer kSchemaVersion: get<int>() would read true, 1.5 or 2^32 + 1 as 1.
    const Json& version = j.at(field);
    if (!version.is_number_integer() || version != kSchemaVersion) {
      return makeError(fmt::format("metadata.json has schema_version {}; this kiln reads {} only",
                                   version.dump(), kSchemaVersion));
    }
    m.schema_version = kSchemaVersion;
    Provenance& p = m.provenance;
    field = "kiln_version";
    p.kiln_version = j.at(field).get<std::string>();
    field = "arch";
    p.arch = j.at(field).get<std::string>();
    field = "host_target";
    p.host_target = j.at(field).get<std::string>();
    field = "tag";
    p.tag = j.at(field).get<std::string>();
    field = "gpu_archs";
    // A malformed entry parses as SM 0, which checkTag (and verify) reject naming the list.
    for (const auto& a : j.at(field)) p.gpu_archs.push_back(parseGpuArch(a.get<std::string>()));
    field = "compile_targets";
    p.compile_targets = j.at(field).get<std::vector<std::string>>();
    field = "cuda_version";
    p.cuda_version = j.at(field).get<std::string>();
    field = "cuda_frontend_version";
    if (j.contains(field)) p.cuda_frontend_version = j.at(field).get<std::string>();
    field = "host_compiler";
    p.host_compiler_command = j.at(field).at("command").get<std::string>();
    p.host_compiler_version = j.at(field).at("version").get<std::string>();
    field = "cutlass_version";
    if (!j.at(field).is_null()) p.cutlass_version = j.at(field).get<std::string>();
    field = "cute_dsl_version";
    if (j.contains(field)) p.cute_dsl_version = j.at(field).get<std::string>();
    field = "cute_dsl_cuda";
    if (j.contains(field)) p.cute_dsl_cuda = j.at(field).get<std::string>();
    if (p.cute_dsl_version.has_value() != p.cute_dsl_cuda.has_value()) {
      return makeError(
          "metadata.json: cute_dsl_version and cute_dsl_cuda must be given together or not at all");
    }
    field = "build_date";
    m.build_date = j.at(field).get<std::string>();
    field = "library";
    m.library.path = j.at(field).at("path").get<std::string>();
    m.library.sha256 = j.at(field).at("sha256").get<std::string>();
    m.library.size = j.at(field).at("size").get<std::uint64_t>();
    field = "doctor";
    // Absent in metadata written before bin/kiln-doctor existed; verify refuses that.
    if (j.contains(field)) {
      m.doctor.path = j.at(field).at("path").get<std::string>();
      m.doctor.sha256 = j.at(field).at("sha256").get<std::string>();
      m.doctor.size = j.at(field).at("size").get<std::uint64_t>();
    }
    field = "headers";
    if (j.contains(field)) m.headers = j.at(field).get<std::map<std::string, std::string>>();
    field = "fingerprint";
    m.fingerprint = j.at(field).get<std::string>();
    field = "runtime_inputs";
    // Absent in metadata written before it existed: nothing recorded, nothing to check.
    if (j.contains(field)) m.runtime_inputs = j.at(field).get<std::map<std::string, std::string>>();
    field = "groups";
    for (const auto& [name, g] : j.at(field).items()) {
      GroupRecord record;
      record.kind = g.at("kind").get<std::string>();
      record.supported_sms = g.at("supported_sms").get<std::vector<int>>();
      record.variants = g.at("variants").get<std::vector<std::string>>();
      m.groups[name] = record;
    }
    for (const auto& [name, v] : j.at("variants").items()) {
      field = "variants." + name;
      VariantRecord record;
      record.name = name;
      record.group = v.at("group").get<std::string>();
      record.kind = v.at("kind").get<std::string>();
      record.entries = v.at("entries").get<std::vector<std::string>>();
      for (const auto& [cname, value] : v.at("constants").items()) {
        Constant c;
        c.name = cname;
        if (value.is_boolean()) {
          c.type = ConstantType::kBool;
          c.value = value.get<bool>();
        } else if (value.is_number_integer()) {
          c.type = ConstantType::kInt;
          c.value = value.get<std::int64_t>();
        } else {
          // dtype and enum constants generate the same header text; the type is not recorded.
          c.type = ConstantType::kEnum;
          c.value = value.get<std::string>();
        }
        record.constants.push_back(c);
      }
      record.inputs = v.at("inputs").get<std::map<std::string, std::string>>();
      record.fingerprint = v.at("fingerprint").get<std::string>();
      for (const auto& [sm_text, s] : v.at("sms").items()) {
        ImageRecord image;
        image.sm = parseSm(sm_text);
        image.target = s.at("target").get<std::string>();
        // Metadata written before PTX images existed has no format: every image was a cubin.
        image.format = s.value("format", std::string(kFormatCubin));
        if (image.format != kFormatCubin && image.format != kFormatPtx) {
          return makeError(
              fmt::format("metadata.json: variants.{} SM {}: format '{}' is neither '{}' nor '{}'",
                          name, sm_text, image.format, kFormatCubin, kFormatPtx));
        }
        image.symbol = s.at("symbol").get<std::string>();
        image.cubin = s.at("cubin").get<std::string>();
        image.sha256 = s.at("sha256").get<std::string>();
        image.size = s.at("size").get<std::uint64_t>();
        image.compile_seconds = s.at("compile_seconds").get<double>();
        image.command = s.at("command").get<std::vector<std::string>>();
        for (const auto& [entry, k] : s.at("kernels").items()) {
          KernelResources r;
          r.registers = k.at("registers").get<int>();
          r.shared_bytes = k.at("shared_bytes").get<long>();
          r.stack_bytes = k.at("stack_bytes").get<long>();
          r.spill_store_bytes = k.at("spill_store_bytes").get<long>();
          r.spill_load_bytes = k.at("spill_load_bytes").get<long>();
          image.kernels[entry] = r;
        }
        record.images[image.sm] = image;
      }
      m.variants[name] = record;
    }
  } catch (const std::exception& e) {
    return makeError(
        fmt::format("metadata.json: field '{}' is missing or malformed: {}", field, e.what()));
  }
  return m;
}

Result<void> checkTag(const Provenance& p) {
  const auto& archs = p.gpu_archs;
  const bool ascending =
      std::adjacent_find(archs.begin(), archs.end(), [](const GpuArch& a, const GpuArch& b) {
        return a.sm >= b.sm;
      }) == archs.end();
  std::vector<std::string> names;
  for (const GpuArch& arch : archs) names.push_back(arch.sm > 0 ? gpuArchName(arch) : "?");
  if (archs.empty() ||
      std::find_if(archs.begin(), archs.end(), [](const GpuArch& a) { return a.sm <= 0; }) !=
          archs.end() ||
      !ascending) {
    return makeError(
        fmt::format(
            "gpu_archs [{}] must be SMs (sm_NN or compute_NN), ascending and without repeats",
            fmt::join(names, ", ")),
        ErrorKind::kUsage);
  }
  if (p.tag != artifactTag(archs)) {
    return makeError(
        fmt::format("tag '{}' does not match gpu_archs (expected '{}')", p.tag, artifactTag(archs)),
        ErrorKind::kUsage);
  }
  return {};
}

Result<void> checkMergeable(const Provenance& old_p, const Provenance& now) {
  auto differs = [](const char* field, const std::string& a, const std::string& b) {
    return makeError(
        fmt::format("the existing artifact's {} differs (old: {}, new: {}); re-run with --clean",
                    field, a, b),
        ErrorKind::kUsage);
  };
  if (old_p.kiln_version != now.kiln_version)
    return differs("kiln version", old_p.kiln_version, now.kiln_version);
  if (old_p.arch != now.arch) return differs("arch", old_p.arch, now.arch);
  if (old_p.host_target != now.host_target)
    return differs("host target", old_p.host_target, now.host_target);
  if (old_p.tag != now.tag) return differs("tag", old_p.tag, now.tag);
  if (old_p.gpu_archs != now.gpu_archs) {
    // Numbers for sm_NN, as this message always said; compute_NN spelled out.
    auto list = [](const std::vector<GpuArch>& archs) {
      std::vector<std::string> names;
      for (const GpuArch& a : archs) names.push_back(a.ptx ? gpuArchName(a) : std::to_string(a.sm));
      return fmt::format("{}", fmt::join(names, ","));
    };
    return differs("gpu archs", list(old_p.gpu_archs), list(now.gpu_archs));
  }
  if (old_p.cuda_version != now.cuda_version)
    return differs("CUDA version", old_p.cuda_version, now.cuda_version);
  if (old_p.cuda_frontend_version != now.cuda_frontend_version) {
    return differs("CUDA front end (nvcc writing PTX for the CUDA 12 ptxas)",
                   old_p.cuda_frontend_version.value_or("none"),
                   now.cuda_frontend_version.value_or("none"));
  }
  if (old_p.host_compiler_command != now.host_compiler_command) {
    return differs("host compiler", old_p.host_compiler_command, now.host_compiler_command);
  }
  if (old_p.host_compiler_version != now.host_compiler_version) {
    return differs("host compiler version", old_p.host_compiler_version, now.host_compiler_version);
  }
  if (old_p.cutlass_version && now.cutlass_version &&
      *old_p.cutlass_version != *now.cutlass_version) {
    return differs("CUTLASS version", *old_p.cutlass_version, *now.cutlass_version);
  }
  if (old_p.cute_dsl_version && now.cute_dsl_version) {
    const std::string old_dsl = cuteDslProvenance(old_p), now_dsl = cuteDslProvenance(now);
    if (old_dsl != now_dsl) return differs("CuTe DSL version", old_dsl, now_dsl);
  }
  return {};
}

std::string cuteDslProvenance(const Provenance& provenance) {
  if (!provenance.cute_dsl_version) return "-";
  return provenance.cute_dsl_cuda
             ? fmt::format("{} ({})", *provenance.cute_dsl_version, *provenance.cute_dsl_cuda)
             : *provenance.cute_dsl_version;
}

std::string utcNow() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buffer;
}

}  // namespace kiln::core
