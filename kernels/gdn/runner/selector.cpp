// The gdn selector (see selector.h): admission checks, variant choice and launch planning for the
// four problems. What they share (dtype, head dims, heads, batch, scale, grid, tokens, pointers of
// the common inputs, the [batch, T] cache apart from the pool) is one function over the fields they
// have in common, so they refuse the same problem with the same words.
#include "selector.h"

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>

#include "gdn/launch.h"
#include "kiln/runner_support.h"

namespace kiln::gdn {
namespace {

Status invalid(const std::string& message) {
  return Status(StatusCode::kInvalidArgument, "gdn: " + message);
}

Status checkPointer(const char* name, const void* p, std::size_t alignment) {
  return runner::checkPointer("gdn", name, p, alignment);
}

bool hasEntry(const VariantInfo& v, const char* entry) {
  const kiln_variant* variant = v.variant == nullptr ? nullptr : v.variant();
  return variant != nullptr && runner::findEntry(*variant, entry) >= 0;
}

const char* gateForm(bool fused) {
  return fused ? " (fused gating)" : "";
}

// The head dims built with `entry`, with the dtype and gate form of each unless `dims_only` (the
// commit, which is matched by head dims alone).
std::string builtList(std::span<const VariantInfo> table, const char* entry, bool dims_only) {
  std::string list;
  for (const VariantInfo& v : table) {
    if (!hasEntry(v, entry)) continue;
    list += (list.empty() ? "" : ", ") + std::to_string(v.head_dim_k) + "x" +
            std::to_string(v.head_dim_v);
    if (!dims_only) list += std::string(" ") + dtypeName(v.dtype) + gateForm(v.fused_gating);
  }
  return list.empty() ? "none" : list;
}

// The first variant with `entry` and head dims dk x dv, and, when `dtype` is given, that dtype and
// gate form; kNotSupported listing what is built otherwise.
Status findVariant(std::span<const VariantInfo> table, const char* entry, const char* what,
                   std::optional<DType> dtype, bool fused_gating, std::int64_t dk, std::int64_t dv,
                   const VariantInfo** info) {
  *info = nullptr;
  for (const VariantInfo& v : table) {
    if (v.head_dim_k == dk && v.head_dim_v == dv && hasEntry(v, entry) &&
        (!dtype || (v.dtype == *dtype && v.fused_gating == fused_gating))) {
      *info = &v;
      return Status::Ok();
    }
  }
  const std::string form =
      dtype ? std::string(" for ") + dtypeName(*dtype) + gateForm(fused_gating) : std::string();
  return Status(StatusCode::kNotSupported,
                std::string("gdn: ") + what + "head dims " + std::to_string(dk) + "x" +
                    std::to_string(dv) + " are not built" + form + "; built (d_k x d_v" +
                    (dtype ? " dtype" : "") + "): " + builtList(table, entry, !dtype));
}

// batch >= 0, and batch and Hv within the grid's y / z limit.
Status checkGrid(std::int64_t batch, std::int64_t heads_v) {
  if (batch < 0) return invalid("batch " + std::to_string(batch) + " must be >= 0");
  if (heads_v > kMaxGridYZ || batch > kMaxGridYZ) {
    return invalid("batch " + std::to_string(batch) + " and heads_v " + std::to_string(heads_v) +
                   " must each be <= " + std::to_string(kMaxGridYZ) + " (grid y/z limit)");
  }
  return Status::Ok();
}

// 1 <= tokens <= the variant's max_tokens (the multi-token kernel's T, the commit's cache's T).
Status checkTokens(std::int64_t tokens, const VariantInfo& info) {
  if (tokens < 1) return invalid("tokens " + std::to_string(tokens) + " must be >= 1");
  if (tokens > info.max_tokens) {
    return invalid("tokens " + std::to_string(tokens) + " exceeds max_tokens " +
                   std::to_string(info.max_tokens) + " of " + info.name);
  }
  return Status::Ok();
}

// The fields both problems have, and which kernel they need.
struct Shape {
  const char* entry;
  const char* what;  // "" for the decode problem, "multi-token decode: " for the other
  DType dtype;
  std::int64_t batch, heads_qk, heads_v, head_dim_k, head_dim_v;
  float scale;
  bool fused_gating;  // the gating inputs are given (Gating), not g and beta
};

template <typename P>
Shape shapeOf(const P& p, const char* entry, const char* what) {
  return Shape{entry,     what,         p.dtype,      p.batch, p.heads_qk,
               p.heads_v, p.head_dim_k, p.head_dim_v, p.scale, p.gating.given()};
}

// One gate form: g and beta, or the gating inputs; never parts of both.
template <typename P>
Status checkGateForm(const P& p) {
  if (p.gating.given() && (p.g != nullptr || p.beta != nullptr)) {
    return invalid(
        "both gate forms are given: pass g and beta, or the gating inputs (gating.a, gating.b, "
        "gating.a_log, gating.dt_bias), not both");
  }
  return Status::Ok();
}

// dtype, head dims, heads, batch, scale and grid; on success *info is the variant.
Status admitShape(std::span<const VariantInfo> table, const Shape& p, const VariantInfo** info) {
  KILN_RETURN_IF_ERROR(runner::checkDtype("gdn", p.dtype));
  KILN_RETURN_IF_ERROR(findVariant(table, p.entry, p.what, p.dtype, p.fused_gating, p.head_dim_k,
                                   p.head_dim_v, info));
  if (p.heads_qk < 1) return invalid("heads_qk " + std::to_string(p.heads_qk) + " must be >= 1");
  if (p.heads_v < p.heads_qk || p.heads_v % p.heads_qk != 0) {
    return invalid("heads_v " + std::to_string(p.heads_v) + " must be a multiple of heads_qk " +
                   std::to_string(p.heads_qk));
  }
  if (p.batch < 0) return invalid("batch " + std::to_string(p.batch) + " must be >= 0");
  if (!std::isfinite(p.scale)) return invalid("scale is not finite");
  return checkGrid(p.batch, p.heads_v);
}

// The variant, its entry, and the launch shape of a batch > 0 (every kernel of the group has the
// decode shape, launch.h).
// The decode launch shape's grid and block (launch.h) for a batch > 0 into *config.
Status decodeLaunch(const VariantInfo& info, std::int64_t batch, std::int64_t heads_v,
                    LaunchConfig* config) {
  const LaunchShape shape = launchShape(info.head_dim_k, info.head_dim_v, info.tile_v,
                                        info.row_split, info.tiles_per_block, heads_v, batch);
  if (!shape.valid)
    return Status(StatusCode::kInternal, std::string("gdn: no launch shape for ") + info.name);
  config->grid = {shape.grid_x, shape.grid_y, shape.grid_z};
  config->block = {shape.block_x, shape.block_y, shape.block_z};
  return Status::Ok();
}

template <typename Args>
Status plan(const VariantInfo& info, const char* entry, std::int64_t batch, std::int64_t heads_v,
            LaunchPlan<Args>* out) {
  out->info = &info;
  KILN_RETURN_IF_ERROR(
      runner::resolveEntry("gdn", info.name, info.variant, entry, &out->variant, &out->entry));
  out->no_op = batch == 0;
  if (out->no_op) return Status::Ok();
  return decodeLaunch(info, batch, heads_v, &out->config);
}

Status checkNumSlots(std::int64_t num_slots) {
  if (num_slots < 1) return invalid("num_slots " + std::to_string(num_slots) + " must be >= 1");
  return Status::Ok();
}

// The inputs both decode problems read, for a batch > 0.
template <typename P>
Status checkInputs(const P& p) {
  KILN_RETURN_IF_ERROR(checkNumSlots(p.num_slots));
  KILN_RETURN_IF_ERROR(checkPointer("q", p.q, kActivationAlignment));
  KILN_RETURN_IF_ERROR(checkPointer("k", p.k, kActivationAlignment));
  KILN_RETURN_IF_ERROR(checkPointer("v", p.v, kActivationAlignment));
  KILN_RETURN_IF_ERROR(checkPointer("out", p.out, kActivationAlignment));
  KILN_RETURN_IF_ERROR(checkPointer("state", p.state, kActivationAlignment));
  if (p.gating.given()) {
    KILN_RETURN_IF_ERROR(checkPointer("gating.a", p.gating.a, kGateAlignment));
    KILN_RETURN_IF_ERROR(checkPointer("gating.b", p.gating.b, kGateAlignment));
    KILN_RETURN_IF_ERROR(checkPointer("gating.a_log", p.gating.a_log, alignof(float)));
    KILN_RETURN_IF_ERROR(checkPointer("gating.dt_bias", p.gating.dt_bias, alignof(float)));
  } else {
    KILN_RETURN_IF_ERROR(checkPointer("g", p.g, alignof(float)));
    KILN_RETURN_IF_ERROR(checkPointer("beta", p.beta, alignof(float)));
  }
  return checkPointer("slots", p.slots, alignof(std::int32_t));
}

// The prefill's own arguments, for a batch > 0: the sequences' offsets and the optional flags.
Status checkPrefillInputs(const PrefillProblem& p) {
  KILN_RETURN_IF_ERROR(
      runner::checkPointer("gdn: prefill", "cu_seqlens", p.cu_seqlens, alignof(std::int32_t)));
  if (p.has_initial_state == nullptr) return Status::Ok();
  return runner::checkPointer("gdn: prefill", "has_initial_state", p.has_initial_state,
                              alignof(std::int32_t));
}

// The prefill's token counts: T and max_seqlen index int32 token rows in the kernels. The chunk
// grid's x, ceil(max_seqlen / chunk), is then below 2^31 and within CUDA's grid.x limit.
Status checkPrefillTokens(const PrefillProblem& p) {
  const auto refuse = [](const std::string& message) { return invalid("prefill: " + message); };
  if (p.tokens < 0) return refuse("tokens " + std::to_string(p.tokens) + " must be >= 0");
  if (p.tokens > kMaxPrefillTokens) {
    return refuse("tokens " + std::to_string(p.tokens) + " exceeds " +
                  std::to_string(kMaxPrefillTokens) + " (int32 token indices)");
  }
  if (p.max_seqlen < 0) {
    return refuse("max_seqlen " + std::to_string(p.max_seqlen) + " must be >= 0");
  }
  if (p.max_seqlen > p.tokens) {
    return refuse("max_seqlen " + std::to_string(p.max_seqlen) + " exceeds tokens " +
                  std::to_string(p.tokens));
  }
  if (p.tokens > 0 && p.max_seqlen < 1) {
    return refuse("max_seqlen 0 must be >= 1 when tokens is " + std::to_string(p.tokens));
  }
  // The kernels index a chunk's first token as the sequence's start + c * chunk in int32, and the
  // last chunk of the last sequence starts at most max_seqlen - 1 past that sequence's start.
  if (p.tokens + p.max_seqlen > kMaxPrefillTokens) {
    return refuse("tokens " + std::to_string(p.tokens) + " + max_seqlen " +
                  std::to_string(p.max_seqlen) + " exceeds " + std::to_string(kMaxPrefillTokens) +
                  " (int32 token indices)");
  }
  return Status::Ok();
}

// The variant, its two entries, both launches and the workspace layout of a batch > 0.
Status planPrefill(const VariantInfo& info, const PrefillProblem& p, PrefillPlan* out) {
  out->info = &info;
  KILN_RETURN_IF_ERROR(runner::resolveEntry("gdn", info.name, info.variant, kPrefillChunkEntry,
                                            &out->variant, &out->chunk_entry));
  KILN_RETURN_IF_ERROR(runner::resolveEntry("gdn", info.name, info.variant, kPrefillStateEntry,
                                            &out->variant, &out->state_entry));
  out->no_op = p.batch == 0;
  if (out->no_op) return Status::Ok();
  if (info.chunk < 1) {
    return Status(StatusCode::kInternal, std::string("gdn: prefill variant ") + info.name +
                                             " has chunk " + std::to_string(info.chunk));
  }
  KILN_RETURN_IF_ERROR(decodeLaunch(info, p.batch, p.heads_v, &out->state_config));
  out->state_config.shared_bytes = prefillStateSmem(info.chunk, info.head_dim_k, info.tile_v,
                                                    info.row_split, kPrefillActivationBytes);
  out->chunk_pass = p.tokens > 0;
  if (out->chunk_pass) {
    const std::int64_t chunks = (p.max_seqlen + info.chunk - 1) / info.chunk;
    out->chunk_config.grid = {static_cast<unsigned>(chunks), out->state_config.grid.y,
                              out->state_config.grid.z};
    out->chunk_config.block = {prefillChunkThreads(info.head_dim_k, info.head_dim_v), 1, 1};
    out->chunk_config.shared_bytes = prefillChunkSmem(info.chunk, info.head_dim_k);
  }
  out->layout = prefillWorkspace(info.head_dim_k, info.head_dim_v, info.chunk,
                                 kPrefillActivationBytes, p.tokens, p.heads_v);
  out->workspace_bytes = static_cast<std::size_t>(out->layout.bytes);
  return Status::Ok();
}

Status checkDevice(const DeviceQuery* device, const kiln_variant* variant) {
  return device != nullptr ? runner::checkDevice("gdn", variant, *device) : Status::Ok();
}

// n0 * n1 * ... float32 elements in bytes, saturating at the largest uintptr_t.
std::uintptr_t floatBytes(std::initializer_list<std::int64_t> dims) {
  constexpr std::uintptr_t kMax = std::numeric_limits<std::uintptr_t>::max();
  std::uintptr_t bytes = sizeof(float);
  for (const std::int64_t d : dims) {
    const auto n = static_cast<std::uintptr_t>(d);
    if (n != 0 && bytes > kMax / n) return kMax;
    bytes *= n;
  }
  return bytes;
}

bool overlaps(const void* a, std::uintptr_t a_bytes, const void* b, std::uintptr_t b_bytes) {
  constexpr std::uintptr_t kMax = std::numeric_limits<std::uintptr_t>::max();
  const auto pa = reinterpret_cast<std::uintptr_t>(a);
  const auto pb = reinterpret_cast<std::uintptr_t>(b);
  const std::uintptr_t a_end = a_bytes > kMax - pa ? kMax : pa + a_bytes;
  const std::uintptr_t b_end = b_bytes > kMax - pb ? kMax : pb + b_bytes;
  return pa < b_end && pb < a_end;
}

// A cache by batch position, [batch, tokens, Hv, d_k, d_v], apart from the pool [num_slots, Hv,
// d_k, d_v] (MtpProblem without cache_slots, CommitProblem); `why` says which is read while the
// other is written.
template <typename P>
Status checkBatchCacheApart(const P& p, const char* why) {
  const std::uintptr_t pool_bytes =
      floatBytes({p.num_slots, p.heads_v, p.head_dim_k, p.head_dim_v});
  const std::uintptr_t cache_bytes =
      floatBytes({p.batch, p.tokens, p.heads_v, p.head_dim_k, p.head_dim_v});
  if (overlaps(p.cache, cache_bytes, p.state, pool_bytes)) {
    return invalid("cache [batch " + std::to_string(p.batch) + ", tokens " +
                   std::to_string(p.tokens) + ", ...] overlaps the state pool [num_slots " +
                   std::to_string(p.num_slots) + ", ...]; " + why);
  }
  return Status::Ok();
}

// The multi-token cache, for a batch > 0: where the states go, sized and apart from the pool that
// is read (or, with cache_slots, the pool itself).
Status checkCache(const MtpProblem& p) {
  KILN_RETURN_IF_ERROR(checkPointer("cache", p.cache, kActivationAlignment));
  if (p.cache_slots == nullptr) {
    if (p.cache_entries != 0) {
      return invalid("cache_entries " + std::to_string(p.cache_entries) +
                     " is given without cache_slots (the cache is then [batch, tokens, ...])");
    }
    return checkBatchCacheApart(p,
                                "the pool is read while the cache is written (with cache_slots the "
                                "cache may be the pool)");
  }
  KILN_RETURN_IF_ERROR(checkPointer("cache_slots", p.cache_slots, alignof(std::int32_t)));
  if (p.cache_entries < 1) {
    return invalid("cache_entries " + std::to_string(p.cache_entries) +
                   " must be >= 1 with cache_slots");
  }
  if (p.cache == p.state) {
    if (p.cache_entries != p.num_slots) {
      return invalid("the cache is the state pool, but cache_entries " +
                     std::to_string(p.cache_entries) + " is not num_slots " +
                     std::to_string(p.num_slots));
    }
    return Status::Ok();
  }
  const std::uintptr_t pool_bytes =
      floatBytes({p.num_slots, p.heads_v, p.head_dim_k, p.head_dim_v});
  const std::uintptr_t cache_bytes =
      floatBytes({p.cache_entries, p.heads_v, p.head_dim_k, p.head_dim_v});
  if (overlaps(p.cache, cache_bytes, p.state, pool_bytes)) {
    return invalid("cache [cache_entries " + std::to_string(p.cache_entries) +
                   ", ...] overlaps the state pool [num_slots " + std::to_string(p.num_slots) +
                   ", ...] without being it (cache == state)");
  }
  return Status::Ok();
}

}  // namespace

Status select(std::span<const VariantInfo> table, const Problem& p, const DeviceQuery* device,
              Plan* out) {
  if (out == nullptr) return Status(StatusCode::kInternal, "gdn: select without a plan");
  *out = Plan{};
  KILN_RETURN_IF_ERROR(checkGateForm(p));
  const Shape shape = shapeOf(p, kDecodeEntry, "");
  const VariantInfo* info = nullptr;
  KILN_RETURN_IF_ERROR(admitShape(table, shape, &info));
  KILN_RETURN_IF_ERROR(plan(*info, shape.entry, p.batch, p.heads_v, out));
  if (!out->no_op) {
    KILN_RETURN_IF_ERROR(checkInputs(p));
    out->args = DecodeArgs{p.q,
                           p.k,
                           p.v,
                           p.g,
                           p.beta,
                           p.gating.a,
                           p.gating.b,
                           p.gating.a_log,
                           p.gating.dt_bias,
                           p.out,
                           p.state,
                           p.slots,
                           p.scale,
                           static_cast<std::int32_t>(p.heads_qk),
                           static_cast<std::int32_t>(p.heads_v)};
  }
  return checkDevice(device, out->variant);
}

Status select(std::span<const VariantInfo> table, const MtpProblem& p, const DeviceQuery* device,
              MtpPlan* out) {
  if (out == nullptr) return Status(StatusCode::kInternal, "gdn: select without a plan");
  *out = MtpPlan{};
  KILN_RETURN_IF_ERROR(checkGateForm(p));
  const Shape shape = shapeOf(p, kDecodeMtpEntry, "multi-token decode: ");
  const VariantInfo* info = nullptr;
  KILN_RETURN_IF_ERROR(admitShape(table, shape, &info));
  KILN_RETURN_IF_ERROR(checkTokens(p.tokens, *info));
  KILN_RETURN_IF_ERROR(plan(*info, shape.entry, p.batch, p.heads_v, out));
  if (!out->no_op) {
    KILN_RETURN_IF_ERROR(checkInputs(p));
    KILN_RETURN_IF_ERROR(checkCache(p));
    out->args = DecodeMtpArgs{p.q,
                              p.k,
                              p.v,
                              p.g,
                              p.beta,
                              p.gating.a,
                              p.gating.b,
                              p.gating.a_log,
                              p.gating.dt_bias,
                              p.out,
                              p.state,
                              p.slots,
                              p.cache,
                              p.cache_slots,
                              p.scale,
                              static_cast<std::int32_t>(p.heads_qk),
                              static_cast<std::int32_t>(p.heads_v),
                              static_cast<std::int32_t>(p.tokens),
                              p.cache_slots != nullptr ? 1 : 0};
  }
  return checkDevice(device, out->variant);
}

Status select(std::span<const VariantInfo> table, const CommitProblem& p, const DeviceQuery* device,
              CommitPlan* out) {
  if (out == nullptr) return Status(StatusCode::kInternal, "gdn: select without a plan");
  *out = CommitPlan{};
  const VariantInfo* info = nullptr;
  KILN_RETURN_IF_ERROR(findVariant(table, kMtpCommitEntry, "mtp commit: ", std::nullopt, false,
                                   p.head_dim_k, p.head_dim_v, &info));
  KILN_RETURN_IF_ERROR(checkTokens(p.tokens, *info));
  if (p.heads_v < 1) return invalid("heads_v " + std::to_string(p.heads_v) + " must be >= 1");
  KILN_RETURN_IF_ERROR(checkGrid(p.batch, p.heads_v));
  KILN_RETURN_IF_ERROR(plan(*info, kMtpCommitEntry, p.batch, p.heads_v, out));
  if (!out->no_op) {
    KILN_RETURN_IF_ERROR(checkNumSlots(p.num_slots));
    KILN_RETURN_IF_ERROR(checkPointer("cache", p.cache, kActivationAlignment));
    KILN_RETURN_IF_ERROR(checkPointer("state", p.state, kActivationAlignment));
    KILN_RETURN_IF_ERROR(checkPointer("slots", p.slots, alignof(std::int32_t)));
    KILN_RETURN_IF_ERROR(checkPointer("accepted", p.accepted, alignof(std::int32_t)));
    KILN_RETURN_IF_ERROR(
        checkBatchCacheApart(p, "the commit reads the cache while it writes the pool"));
    out->args = CommitArgs{p.cache,
                           p.state,
                           p.slots,
                           p.accepted,
                           static_cast<std::int32_t>(p.tokens),
                           static_cast<std::int32_t>(p.heads_v)};
  }
  return checkDevice(device, out->variant);
}

Status select(std::span<const VariantInfo> table, const PrefillProblem& p,
              const DeviceQuery* device, PrefillPlan* out, PointerChecks pointers) {
  if (out == nullptr) return Status(StatusCode::kInternal, "gdn: select without a plan");
  *out = PrefillPlan{};
  KILN_RETURN_IF_ERROR(checkGateForm(p));
  const Shape shape = shapeOf(p, kPrefillChunkEntry, "prefill: ");
  const VariantInfo* info = nullptr;
  KILN_RETURN_IF_ERROR(admitShape(table, shape, &info));
  KILN_RETURN_IF_ERROR(checkPrefillTokens(p));
  KILN_RETURN_IF_ERROR(planPrefill(*info, p, out));
  if (!out->no_op) {
    if (pointers == PointerChecks::kCheck) {
      KILN_RETURN_IF_ERROR(checkInputs(p));
      KILN_RETURN_IF_ERROR(checkPrefillInputs(p));
    }
    // The workspace arrays (null here) are the caller's, bound by bindWorkspace at run time.
    const auto heads_qk = static_cast<std::int32_t>(p.heads_qk);
    const auto heads_v = static_cast<std::int32_t>(p.heads_v);
    out->chunk_args = PrefillChunkArgs{p.q,
                                       p.k,
                                       p.v,
                                       p.g,
                                       p.beta,
                                       p.gating.a,
                                       p.gating.b,
                                       p.gating.a_log,
                                       p.gating.dt_bias,
                                       p.slots,
                                       p.cu_seqlens,
                                       nullptr,
                                       nullptr,
                                       nullptr,
                                       nullptr,
                                       nullptr,
                                       nullptr,
                                       p.scale,
                                       heads_qk,
                                       heads_v};
    out->state_args = PrefillStateArgs{nullptr,
                                       nullptr,
                                       nullptr,
                                       nullptr,
                                       nullptr,
                                       nullptr,
                                       p.out,
                                       p.state,
                                       p.slots,
                                       p.cu_seqlens,
                                       p.has_initial_state,
                                       p.has_initial_state != nullptr ? 1 : 0,
                                       heads_v};
  }
  return checkDevice(device, out->variant);
}

Status bindWorkspace(PrefillPlan* plan, void* workspace, std::size_t workspace_bytes) {
  // Without tokens there is no chunk: the state kernel reads no workspace, its arguments stay null.
  if (plan->workspace_bytes == 0) return Status::Ok();
  if (workspace == nullptr) {
    return invalid("prefill: needs a workspace of " + std::to_string(plan->workspace_bytes) +
                   " bytes (workspaceSize()); workspace is null");
  }
  if (workspace_bytes < plan->workspace_bytes) {
    return invalid("prefill: workspace of " + std::to_string(workspace_bytes) +
                   " bytes is smaller than the " + std::to_string(plan->workspace_bytes) +
                   " bytes the prefill needs");
  }
  KILN_RETURN_IF_ERROR(
      runner::checkPointer("gdn: prefill", "workspace", workspace, kPrefillWorkspaceAlignment));
  auto* base = static_cast<unsigned char*>(workspace);
  const PrefillWorkspace& w = plan->layout;
  PrefillChunkArgs& c = plan->chunk_args;
  c.ws_w = base + w.w;
  c.ws_u = base + w.u;
  c.ws_qd = base + w.qd;
  c.ws_kd = base + w.kd;
  c.ws_attn = reinterpret_cast<float*>(base + w.attn);
  c.ws_gc = reinterpret_cast<float*>(base + w.gc);
  PrefillStateArgs& s = plan->state_args;
  s.ws_w = c.ws_w;
  s.ws_u = c.ws_u;
  s.ws_qd = c.ws_qd;
  s.ws_kd = c.ws_kd;
  s.ws_attn = c.ws_attn;
  s.ws_gc = c.ws_gc;
  return Status::Ok();
}

}  // namespace kiln::gdn
