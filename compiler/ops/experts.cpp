#include "experts.hpp"

#include <moejit/error.hpp>

#include "activation.hpp"
#include "compiler/codegen.hpp"
#include "sm90_target.hpp"
#include "templates/experts_args.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <initializer_list>

namespace moejit::detail {

namespace {

// Warps splitting a GEMM's K (k elements, `warps_at_one_token` row-group warps when a call of
// one token touches topk experts): two while every warp keeps at least 16 blocks of 32 (its
// pipeline stays full), and more while a one-token call would keep fewer than kDecodeWarps
// warps streaming (24 an SM of an H200: enough loads in flight to saturate HBM), as long as each
// keeps 24 blocks. Measured on the H200: Kimi-K3 tp 8's GEMM1 (K 3584) split 4 ways, 28 blocks a
// warp, is 6-16% faster at T 1-64; Qwen3-30B-A3B's (K 2048, 16 blocks) 15-24% slower at T >= 8.
constexpr std::int64_t kDecodeWarps = 3072;
int k_splits(std::int64_t k, std::int64_t warps_at_one_token) {
  const std::int64_t blocks = k / 32;
  int split = blocks % 2 == 0 && blocks / 2 >= 16 ? 2 : 1;
  for (int s = split; s <= 4; ++s) {
    if (blocks % s != 0 || (s > split && blocks / s < 24)) continue;
    split = s;
    if (warps_at_one_token * s >= kDecodeWarps) break;
  }
  return split;
}
}  // namespace

namespace {

// The measured ring depths (compiler/ops/experts_rings.json: the defaults, and the shapes where
// others measured faster), read once.
const nlohmann::json& experts_rings() {
  static const nlohmann::json data = nlohmann::json::parse(experts_rings_json());
  return data;
}

// The prefill tiles' measured overrides (compiler/ops/experts_prefill_tiles.json), read once.
const nlohmann::json& experts_prefill_tiles() {
  static const nlohmann::json data = nlohmann::json::parse(experts_prefill_tiles_json());
  return data;
}

}  // namespace

ExpertsTiling experts_tiling(const ExpertsSpec& s) {
  ExpertsTiling t;
  const std::int64_t experts_at_one_token = s.masked() ? s.num_experts : std::min<std::int64_t>(s.topk, s.num_experts);
  t.split1 = k_splits(s.hidden, experts_at_one_token * s.intermediate / kExpertsGemm1Columns);
  t.split2 = k_splits(s.intermediate, experts_at_one_token * s.hidden / kExpertsGemm2Columns);
  // At most 256 threads a CTA: more K-split warps take fewer row groups.
  t.groups1 = t.split1 > 2 ? 2 : 4;
  t.groups2 = t.split2 > 2 ? 2 : 4;
  const auto rings = [&t](const nlohmann::json& from) {
    t.ring1 = from.value("ring1", t.ring1);
    t.ring2 = from.value("ring2", t.ring2);
    t.ring_one = from.value("ring_one", t.ring_one);
  };
  rings(experts_rings().at("defaults"));
  for (const auto& e : experts_rings().at("entries")) {
    if (e.at("hidden").get<std::int64_t>() == s.hidden && e.at("intermediate").get<std::int64_t>() == s.intermediate) rings(e);
  }
  // The spec's own choices last (validated against the templates' rules when it was read).
  const auto force = [](int& field, int value) {
    if (value > 0) field = value;
  };
  const ExpertsTiles& f = s.tiles;
  force(t.groups1, f.groups1);
  force(t.split1, f.split1);
  force(t.groups2, f.groups2);
  force(t.split2, f.split2);
  force(t.ring1, f.ring1);
  force(t.ring2, f.ring2);
  force(t.ring_one, f.ring_one);
  return t;
}

int experts_one_token_threads(const ExpertsSpec& s, const ExpertsTiling& t) noexcept {
  const int slots = std::max(1, 16 / t.split2);
  return 32 * static_cast<int>(std::min<std::int64_t>(s.topk, slots)) * t.split2;
}

std::int64_t experts_one_token_stash_bytes(const ExpertsSpec& s, const ExpertsTiling& t, int regions) noexcept {
  // templates/experts.cuh's Stash: each split's 16 padded rows, and an h row
  const std::int64_t stride = experts_stash_stride(static_cast<int>(2 * s.intermediate / t.split2));
  return static_cast<std::int64_t>(regions) * (16 * t.split2 * stride + 2 * s.intermediate);
}

int experts_one_token_stash_regions(const ExpertsSpec& s, const ExpertsTiling& t, const OneTokenResidency& r) noexcept {
  if (s.masked() || r.sm_count <= 0) return 0;
  const auto per_sm = [&](std::int64_t ctas) { return (ctas + r.sm_count - 1) / r.sm_count; };
  const std::int64_t each = r.shared_per_sm / per_sm(s.hidden / kExpertsOneTokenColumns) - kReservedSharedPerBlock;
  const std::int64_t dynamic = std::min<std::int64_t>(each, r.shared_per_block) - r.gemm2_static;
  const std::int64_t regions = std::min<std::int64_t>(dynamic / experts_one_token_stash_bytes(s, t, 1), s.topk);
  // At most two slots a region: the kernel's barrier waits tell a region's phases apart by parity
  // only (and past two, the later slots' copies would wait on a chain of reads). Else the register ring.
  return regions > 0 && 2 * regions >= s.topk ? static_cast<int>(regions) : 0;
}

namespace {

// The largest of `choices` that divides n, or 0.
int largest_divisor(std::int64_t n, std::initializer_list<int> choices) {
  for (int c : choices) {
    if (n % c == 0) return c;
  }
  return 0;
}

// Stages of the prefill ring that fit a CTA's shared memory beside the epilogue staging, at most 6.
int stages_for(int stage_bytes) { return std::min(6, (sm90::kSharedPerCta - 2048 - kExpertsPrefillStaging) / stage_bytes); }

// Tiles a band holds: 16 MiB of A tiles (128 rows x K), about a third of the L2, so that the
// band's A stays there while its CTAs sweep the N tiles.
constexpr std::int64_t kBandBytes = 16LL << 20;
static_assert(3 * kBandBytes <= sm90::kL2Bytes);
int band_for(std::int64_t k) { return static_cast<int>(std::max<std::int64_t>(1, kBandBytes / (128 * k * 2))); }

// The constants both experts templates read (experts.cuh's Config).
void common_constants(StubBuilder& stub, const ExpertsSpec& s, const ExpertsTiling& t) {
  stub.integer("kH", s.hidden)
      .integer("kI", s.intermediate)
      .integer("kE", s.num_experts)
      .integer("kK", s.topk)
      .integer("kIdRange", s.id_range())
      .flag("kMasked", s.masked())
      .flag("kHasMap", s.global_experts > 0)
      .flag("kWeightOnInput", s.weight_on_input)
      .flag("kBias", s.bias)
      .flag("kIds64", s.ids_dtype == DType::i64)
      .type("T", s.dtype)
      .type("Out", s.dtype)
      .constant("int", "kGroups1", std::to_string(t.groups1))
      .constant("int", "kSplit1", std::to_string(t.split1))
      .constant("int", "kGroups2", std::to_string(t.groups2))
      .constant("int", "kSplit2", std::to_string(t.split2))
      .constant("int", "kRing1", std::to_string(t.ring1))
      .constant("int", "kRing2", std::to_string(t.ring2))
      .constant("int", "kRingOne", std::to_string(t.ring_one));
  add_activation_constants(stub, s.activation);
}

}  // namespace

int ExpertsPrefillTiling::shared_bytes(int gemm) const noexcept {
  const int n = gemm == 1 ? 2 * cols1 : n2;
  const int stages = gemm == 1 ? stages1 : stages2;
  // the ring, 1 KB of alignment, each stage's barriers and unit slot, the gathering producer's two
  // hand-off slots, the epilogue staging
  return stages * (kExpertsPrefillRows + n) * 128 + 1024 + 48 * stages + 64 + kExpertsPrefillStaging;
}

ExpertsPrefillTiling experts_prefill_tiling(const ExpertsSpec& s, std::string_view arch) {
  return experts_prefill_tiling(s, arch, experts_prefill_tiles());
}

ExpertsPrefillTiling experts_prefill_tiling(const ExpertsSpec& s, std::string_view arch, const nlohmann::json& overrides) {
  ExpertsPrefillTiling t;
  if (arch != "sm_90a") return t;  // wgmma: sm_90a only (sm_100's tcgen05 path is not written)
  // N of the wgmma shapes templates/wgmma.cuh holds; GEMM1's N is 2 cols1. GELU (erf): erfc's
  // registers beside 128 accumulators a thread spill in GEMM1's epilogue (bf16 at N 256: 48
  // bytes), so 64 columns (N 128, 64 accumulators; fp16 still spills 56 bytes there).
  t.cols1 = s.activation.kind == ActivationKind::gelu ? largest_divisor(s.intermediate, {64})
                                                      : largest_divisor(s.intermediate, {128, 120, 96, 64});
  t.n2 = largest_divisor(s.hidden, {256, 240, 192, 128});
  t.band1 = band_for(s.hidden);
  t.band2 = band_for(s.intermediate);
  for (const auto& e : overrides.at("entries")) {
    if (e.at("hidden").get<std::int64_t>() != s.hidden || e.at("intermediate").get<std::int64_t>() != s.intermediate) continue;
    if (e.contains("activation") && e.at("activation").get<std::string>() != to_string(s.activation.kind)) continue;
    t.cols1 = e.value("cols1", t.cols1);
    t.n2 = e.value("n2", t.n2);
    t.band1 = e.value("band1", t.band1);
    t.band2 = e.value("band2", t.band2);
    // a wgmma N the templates hold dividing the output, and bands of at least a tile
    const auto fits = [](std::int64_t n, std::int64_t of) { return ExpertsTiles::wgmma_n(n) && of % n == 0; };
    if (!fits(2 * t.cols1, 2 * s.intermediate) || !fits(t.n2, s.hidden) || t.band1 < 1 || t.band2 < 1) {
      throw Error({.kind = ErrorKind::internal, .message = "compiler/ops/experts_prefill_tiles.json: an entry the prefill GEMMs cannot take",
                   .found = e.dump()});
    }
  }
  const ExpertsTiles& f = s.tiles;  // the spec's own choices last (held to the templates' rules when it was read)
  if (f.cols1 > 0) t.cols1 = f.cols1;
  if (f.n2 > 0) t.n2 = f.n2;
  if (f.band1 > 0) t.band1 = f.band1;
  if (f.band2 > 0) t.band2 = f.band2;
  if (t.cols1 == 0 || t.n2 == 0) return t;
  t.stages1 = stages_for((kExpertsPrefillRows + 2 * t.cols1) * 128);
  t.stages2 = stages_for((kExpertsPrefillRows + t.n2) * 128);
  t.ok = true;
  return t;
}

std::vector<Contract> experts_contracts(const OpSpec& op, std::string_view arch) {
  const auto& s = dynamic_cast<const ExpertsSpec&>(op);
  const auto t = experts_tiling(s);
  const auto& act = s.activation;
  Contract c("experts", std::string(arch), "experts.cuh");
  c.set("hidden", std::to_string(s.hidden))
      .set("intermediate", std::to_string(s.intermediate))
      .set("num_experts", std::to_string(s.num_experts))
      .set("topk", std::to_string(s.topk))
      .set("id_range", std::to_string(s.id_range()))
      .set("layout", std::string(to_string(s.layout)))
      .set("expert_map", s.global_experts > 0 ? "true" : "false")
      .set("weight_on_input", s.weight_on_input ? "true" : "false")
      .set("bias", s.bias ? "true" : "false")
      .set("dtype", std::string(spec_name(s.dtype)))
      .set("ids_dtype", std::string(spec_name(s.ids_dtype)))
      .set("activation", std::string(to_string(act.kind)))
      .set("interleaved", act.interleaved ? "true" : "false");
  if (act.kind == ActivationKind::situ) c.set("beta", canonical_float(act.beta)).set("linear_beta", canonical_float(act.linear_beta));
  if (act.kind == ActivationKind::swiglu_oai) c.set("alpha", canonical_float(act.alpha)).set("limit", canonical_float(act.limit));
  c.set("groups1", std::to_string(t.groups1))
      .set("split1", std::to_string(t.split1))
      .set("groups2", std::to_string(t.groups2))
      .set("split2", std::to_string(t.split2))
      .set("ring1", std::to_string(t.ring1))
      .set("ring2", std::to_string(t.ring2))
      .set("ring_one", std::to_string(t.ring_one));

  StubBuilder stub("experts.cuh");
  common_constants(stub, s, t);
  constexpr std::string_view kGemmArgs = "moejit::ExpertsGemmArgs";
  std::vector<StubBuilder::Kernel> kernels = {
      {std::string(kExpertsMeta), "moejit::experts_meta_kernel", "moejit::ExpertsMetaArgs"},
      {std::string(kExpertsGemm1Small), fmt::format("moejit::experts_gemm1_kernel<{}>", kExpertsSmallTile / 8), std::string(kGemmArgs)},
      {std::string(kExpertsGemm1Large), fmt::format("moejit::experts_gemm1_kernel<{}>", kExpertsLargeTile / 8), std::string(kGemmArgs)},
      {std::string(kExpertsGemm2Small), fmt::format("moejit::experts_gemm2_kernel<{}>", kExpertsSmallTile / 8), std::string(kGemmArgs)},
      {std::string(kExpertsGemm2Large), fmt::format("moejit::experts_gemm2_kernel<{}>", kExpertsLargeTile / 8), std::string(kGemmArgs)}};
  if (!s.masked()) {
    kernels.push_back({std::string(kExpertsCombine), "moejit::experts_combine_kernel", "moejit::ExpertsCombineArgs"});
    kernels.push_back({std::string(kExpertsGemm1One), "moejit::experts_gemm1_kernel<1, true>", std::string(kGemmArgs)});
    // Its weight stash: as many regions as the device's shared memory holds beside the grid.
    kernels.push_back({std::string(kExpertsGemm2One), "moejit::experts_gemm2_one_kernel", std::string(kGemmArgs), Contract::kSharedAtLoad});
  }
  stub.emit(c, kernels);
  std::vector<Contract> out = {c};

  const auto p = experts_prefill_tiling(s, arch);
  if (!p.ok) return out;
  Contract w("experts_prefill", std::string(arch), "experts_prefill.cuh");
  for (const auto& f : c.fields()) w.set(f.name, f.value);
  w.set("cols1", std::to_string(p.cols1))
      .set("n2", std::to_string(p.n2))
      .set("stages1", std::to_string(p.stages1))
      .set("stages2", std::to_string(p.stages2))
      .set("band1", std::to_string(p.band1))
      .set("band2", std::to_string(p.band2));
  StubBuilder prefill("experts_prefill.cuh");
  common_constants(prefill, s, t);
  prefill.constant("int", "kCols1", std::to_string(p.cols1))
      .constant("int", "kN2", std::to_string(p.n2))
      .constant("int", "kStages1", std::to_string(p.stages1))
      .constant("int", "kStages2", std::to_string(p.stages2))
      .constant("int", "kBand1", std::to_string(p.band1))
      .constant("int", "kBand2", std::to_string(p.band2));
  constexpr std::string_view kPrefillArgs = "const __grid_constant__ moejit::ExpertsPrefillArgs";
  std::vector<StubBuilder::Kernel> wk = {
      {std::string(kExpertsPrefill1), "moejit::experts_prefill_kernel<1>", std::string(kPrefillArgs), p.shared_bytes(1)},
      {std::string(kExpertsPrefill2), "moejit::experts_prefill_kernel<2>", std::string(kPrefillArgs), p.shared_bytes(2)}};
  if (!s.masked()) {
    // x' only where the router weight scales it: else GEMM1's producer gathers x's rows itself.
    if (s.weight_on_input) wk.push_back({std::string(kExpertsGather), "moejit::experts_gather_kernel", "moejit::ExpertsGatherArgs"});
    wk.push_back({std::string(kExpertsCount), "moejit::experts_count_kernel", "moejit::ExpertsMetaArgs"});
    wk.push_back({std::string(kExpertsScan), "moejit::experts_scan_kernel", "moejit::ExpertsMetaArgs"});
    wk.push_back({std::string(kExpertsRank), "moejit::experts_rank_kernel", "moejit::ExpertsMetaArgs"});
  }
  prefill.emit(w, wk);
  out.push_back(std::move(w));
  return out;
}

}  // namespace moejit::detail
