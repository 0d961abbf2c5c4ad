// Launcher of the experts op (templates/experts.cuh): the metadata, GEMM1, GEMM2 and combine
// kernels chained with programmatic dependent launch, over a workspace the op allocates at load
// for its spec's max_tokens, so that a launch allocates nothing and is legal in graph capture.
// Calls with many rows an expert (at or past the crossover in runtime/experts_crossover.json)
// take the prefill GEMMs (templates/experts_prefill.cuh, sm_90a) between the same metadata and
// combine.
#include <moejit/error.hpp>

#include "experts_crossover.hpp"

#include "compiler/ops/experts.hpp"
#include "device.hpp"
#include "kernel.hpp"
#include "op_loader.hpp"
#include "tma.hpp"
#include "templates/experts_args.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <string_view>

namespace moejit::detail {

namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

}  // namespace

std::string_view experts_crossover_json();

const nlohmann::json& experts_crossover_data() {
  static const nlohmann::json data = nlohmann::json::parse(experts_crossover_json());
  return data;
}

std::int64_t prefill_crossover_rows(const nlohmann::json& data, std::string_view gpu, const ExpertsSpec& s) {
  for (const auto& table : data.at("tables")) {
    if (gpu.find(table.at("gpu").get_ref<const std::string&>()) == std::string_view::npos) continue;
    for (const auto& e : table.at("entries")) {
      if (e.at("hidden") == s.hidden && e.at("intermediate") == s.intermediate) return e.at("crossover_rows").get<std::int64_t>();
    }
    return table.at("default_crossover_rows").get<std::int64_t>();
  }
  throw Error({.kind = ErrorKind::internal, .message = "runtime/experts_crossover.json has no table for this GPU", .found = std::string(gpu)});
}

namespace {

// The index of the tensor called `name` in the op's launch order, or -1.
int tensor_index(const std::vector<TensorDecl>& tensors, std::string_view name) {
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

// A TMA descriptor of a caller's tensor, with what it was encoded for.
struct CachedMap {
  const void* base = nullptr;
  std::int64_t rows = 0;
  TmaMap map{};
};

class ExpertsOp final : public Op {
 public:
  ExpertsOp(Context& context, std::shared_ptr<const ExpertsSpec> spec)
      : Op(spec),
        spec_(*spec),
        tiling_(experts_tiling(*spec)),
        prefill_(experts_prefill_tiling(*spec, context.device().arch)),
        pdl_(context.options().programmatic_launch),
        path_(context.options().experts_path),
        driver_(context.driver()),
        sm_count_(context.device().sm_count) {
    const auto all = contracts(*spec, context.device().arch);
    const auto& contract = all.front();
    auto load = [&](std::string_view role, int threads) {
      auto kernel = context.kernel(contract, role);
      kernel->set_block({static_cast<unsigned>(threads), 1, 1});
      return kernel;
    };
    meta_ = load(kExpertsMeta, kExpertsMetaThreads);
    const int threads1 = 32 * tiling_.groups1 * tiling_.split1, threads2 = 32 * tiling_.groups2 * tiling_.split2;
    gemm1_[0] = load(kExpertsGemm1Small, threads1);
    gemm1_[1] = load(kExpertsGemm1Large, threads1);
    gemm2_[0] = load(kExpertsGemm2Small, threads2);
    gemm2_[1] = load(kExpertsGemm2Large, threads2);
    if (!spec_.masked()) {
      combine_ = load(kExpertsCombine, kExpertsCombineThreads);
      auto gemm1 = load(kExpertsGemm1One, 32 * tiling_.split1);
      auto gemm2 = load(kExpertsGemm2One, experts_one_token_threads(spec_, tiling_));
      if (context.options().experts_stash) {
        const auto& d = context.device();
        stash_regions_ = experts_one_token_stash_regions(spec_, tiling_, {d.sm_count, d.max_shared_per_sm, d.max_shared_per_block,
                                                                          gemm2->info().resources.shared_bytes});
      }
      if (stash_regions_ > 0) {
        gemm2->set_dynamic_shared(static_cast<unsigned>(experts_one_token_stash_bytes(spec_, tiling_, stash_regions_)));
      } else {
        gemm2->prefer_l1();  // its ring's loads in flight need L1 (experts.cuh)
      }
      one_[0] = std::move(gemm1);
      one_[1] = std::move(gemm2);
    }
    if (prefill_.ok) {
      const auto& w = all.at(1);
      for (int g = 0; g < 2; ++g) {
        const auto role = g == 0 ? kExpertsPrefill1 : kExpertsPrefill2;
        auto kernel = context.kernel(w, role);
        kernel->set_block({kExpertsPrefillThreads, 1, 1});
        prefill_gemm_[g] = std::move(kernel);
      }
      if (!spec_.masked()) {
        if (spec_.weight_on_input) {
          auto kernel = context.kernel(w, kExpertsGather);
          kernel->set_block({kExpertsGatherThreads, 1, 1});
          gather_ = std::move(kernel);
        }
        for (auto [role, slot] : {std::pair{kExpertsCount, &sort_[0]}, {kExpertsScan, &sort_[1]}, {kExpertsRank, &sort_[2]}}) {
          auto k = context.kernel(w, role);
          k->set_block({kExpertsMetaThreads, 1, 1});
          *slot = std::move(k);
        }
      }
      crossover_ = prefill_crossover_rows(experts_crossover_data(), context.device().name, spec_);
    }
    const auto& t = tensors();
    for (auto [name, index] : {std::pair{"x", &x_}, {"topk_ids", &ids_}, {"topk_weights", &weights_}, {"expert_num_tokens", &counts_},
                               {"w13", &w13_}, {"w2", &w2_}, {"b13", &b13_}, {"b2", &b2_}, {"expert_map", &map_}, {"y", &y_}}) {
      *index = tensor_index(t, name);
    }
    allocate(context.driver());
  }

 private:
  // The workspace for max_tokens: the sort (standard), the work list and GEMM1's output h, and
  // GEMM2's per-slot output o (standard).
  void allocate(const Driver& driver) {
    const std::int64_t t = spec_.max_tokens();
    const std::int64_t rows = rows_for(t);
    if (!spec_.masked()) {
      sorted_ = DeviceBuffer(driver, static_cast<std::size_t>(rows) * 4);
      position_ = DeviceBuffer(driver, static_cast<std::size_t>(rows) * 4);
      o_ = DeviceBuffer(driver, static_cast<std::size_t>(rows * spec_.hidden) * size_of(spec_.dtype));
    }
    tiles_ = DeviceBuffer(driver, static_cast<std::size_t>(max_tiles(t, kExpertsSmallTile)) * sizeof(ExpertsTile));
    tile_count_ = DeviceBuffer(driver, 4 * sizeof(int));  // ExpertsMetaArgs::tile_count
    h_ = DeviceBuffer(driver, static_cast<std::size_t>(rows * spec_.intermediate) * size_of(spec_.dtype));
    if (prefill_.ok && !spec_.masked()) {
      block_counts_ = DeviceBuffer(driver, static_cast<std::size_t>(ceil_div(std::max<std::int64_t>(rows, 1), kExpertsSortChunk) * spec_.num_experts) * 4);
    }
    if (prefill_.ok && rows > 0) {
      // x' (GEMM1's A) lives in o: GEMM2 writes o only after GEMM1 has read all of x'.
      if (gather_) a1_ = tma_map(driver, o_.ptr(), spec_.hidden, rows, kExpertsPrefillRows, spec_.dtype);
      a2_ = tma_map(driver, h_.ptr(), spec_.intermediate, rows, kExpertsPrefillRows, spec_.dtype);
      // The epilogues' TMA stores: a warp's 16 rows x 64 columns.
      c1_ = tma_map(driver, h_.ptr(), spec_.intermediate, rows, kExpertsPrefillStoreRows, spec_.dtype);
      if (!spec_.masked()) c2_ = tma_map(driver, o_.ptr(), spec_.hidden, rows, kExpertsPrefillStoreRows, spec_.dtype);
    }
  }

  // Whether a call takes the prefill GEMMs: rows an active expert holds on average at or past
  // the crossover (or the path Options force).
  bool prefill_call(std::int64_t tokens, const LaunchHints& hints) const {
    if (!prefill_.ok || path_ == Options::ExpertsPath::decode) return false;
    if (path_ == Options::ExpertsPath::prefill) return true;
    return rows_per_expert(tokens, hints) >= crossover_;
  }

  // A caller's tensor's TMA descriptor, encoded again only when the tensor moved or its rows changed.
  const TmaMap& cached_map(CachedMap& slot, const void* base, std::int64_t k, std::int64_t rows, int box_rows) const {
    if (slot.base != base || slot.rows != rows) {
      slot.map = tma_map(driver_, base, k, rows, box_rows, spec_.dtype);
      slot.base = base;
      slot.rows = rows;
    }
    return slot.map;
  }

  // The weights' TMA descriptors.
  const TmaMap& weight_map(int gemm, const void* w) const {
    const std::int64_t e = spec_.num_experts, h = spec_.hidden, i = spec_.intermediate;
    const int box1 = spec_.activation.interleaved ? 2 * prefill_.cols1 : prefill_.cols1;
    return gemm == 0 ? cached_map(maps_.w13, w, h, e * 2 * i, box1) : cached_map(maps_.w2, w, i, e * h, prefill_.n2);
  }

  // The metadata's arguments, for GEMM tiles of n rows: its work list and sort stay in the workspace.
  ExpertsMetaArgs meta_args(std::span<const Buffer> b, std::int64_t tokens, int n) const {
    return {at(b, ids_),
            static_cast<const int*>(at(b, map_)),
            static_cast<const int*>(at(b, counts_)),
            tokens,
            n,
            static_cast<int*>(sorted_.ptr()),
            static_cast<int*>(position_.ptr()),
            static_cast<ExpertsTile*>(tiles_.ptr()),
            static_cast<int*>(tile_count_.ptr()),
            static_cast<int*>(block_counts_.ptr()),
            kExpertsSortChunk};
  }

  // The one-block metadata kernel.
  ExpertsMetaArgs launch_meta(std::span<const Buffer> b, std::int64_t tokens, int n, CUstream stream, const LaunchHints& hints) const {
    const auto meta = meta_args(b, tokens, n);
    meta_->launch({1, 1, 1}, meta, stream, pdl_ || hints.chained);
    return meta;
  }

  // The metadata of a standard-layout prefill call over many blocks (count, scan, rank): the same
  // work list, sort and positions as the one-block kernel.
  ExpertsMetaArgs launch_sort(std::span<const Buffer> b, std::int64_t tokens, int n, CUstream stream, const LaunchHints& hints) const {
    const auto meta = meta_args(b, tokens, n);
    const auto blocks = static_cast<unsigned>(ceil_div(rows_for(tokens), kExpertsSortChunk));
    sort_[0]->launch({blocks, 1, 1}, meta, stream, pdl_ || hints.chained);
    sort_[1]->launch({1, 1, 1}, meta, stream, true);
    sort_[2]->launch({blocks, 1, 1}, meta, stream, true);
    return meta;
  }

  void launch_prefill(std::span<const Buffer> b, std::int64_t tokens, CUstream stream, const LaunchHints& hints) const {
    constexpr int n = kExpertsPrefillRows;
    // One block's sort while the pairs fit one chunk: one launch instead of three.
    const bool one_block = spec_.masked() || rows_for(tokens) <= kExpertsSortChunk;
    const auto meta = one_block ? launch_meta(b, tokens, n, stream, hints) : launch_sort(b, tokens, n, stream, hints);
    auto* tiles = meta.tiles;
    auto* count = meta.tile_count;
    auto* sorted = meta.sorted;
    auto* position = meta.position;
    const auto* weights = static_cast<const float*>(at(b, weights_));
    ExpertsPrefillArgs g1{};
    if (spec_.masked()) {
      g1.a = cached_map(maps_.x, at(b, x_), spec_.hidden, spec_.num_experts * tokens, n);
    } else if (!gather_) {
      g1.x = at(b, x_);  // GEMM1's producer gathers its rows
    } else {
      const std::int64_t vectors = tokens * (spec_.hidden / 8);
      const auto grid = static_cast<unsigned>(std::min<std::int64_t>(ceil_div(vectors, kExpertsGatherThreads), 16LL * sm_count_));
      const ExpertsGatherArgs gather{at(b, x_), weights, position, o_.ptr(), tokens};
      gather_->launch({grid, 1, 1}, gather, stream, true);
      g1.a = a1_;
    }
    // Persistent CTAs: one an SM, or one a unit where there are fewer.
    const auto tiles_max = max_tiles(tokens, n);
    const auto persistent = [&](std::int64_t n_tiles) {
      return Dim3{static_cast<unsigned>(std::min<std::int64_t>(sm_count_, tiles_max * n_tiles)), 1, 1};
    };
    g1.b = weight_map(0, at(b, w13_));
    g1.bias = at(b, b13_);
    g1.topk_weights = weights;
    g1.sorted = sorted;
    g1.tiles = tiles;
    g1.tile_count = count;
    g1.c = c1_;
    g1.out = h_.ptr();
    g1.tokens = tokens;
    prefill_gemm_[0]->launch(persistent(spec_.intermediate / prefill_.cols1), g1, stream, true);
    ExpertsPrefillArgs g2 = g1;
    g2.a = a2_;
    g2.b = weight_map(1, at(b, w2_));
    g2.bias = at(b, b2_);
    g2.out = spec_.masked() ? b[static_cast<std::size_t>(y_)].ptr : o_.ptr();
    g2.c = spec_.masked() ? cached_map(maps_.y, g2.out, spec_.hidden, spec_.num_experts * tokens, kExpertsPrefillStoreRows) : c2_;
    prefill_gemm_[1]->launch(persistent(spec_.hidden / prefill_.n2), g2, stream, true);
    if (!spec_.masked()) combine(b, tokens, position, stream);
  }

  void combine(std::span<const Buffer> b, std::int64_t tokens, const int* position, CUstream stream) const {
    const ExpertsCombineArgs c{o_.ptr(), position, b[static_cast<std::size_t>(y_)].ptr, tokens};
    const auto vectors = tokens * (spec_.hidden / 8);
    combine_->launch({static_cast<unsigned>(ceil_div(vectors, kExpertsCombineThreads)), 1, 1}, c, stream, true);
  }

  // GEMM rows of a call: (token, slot) pairs, or every expert's T_max rows when masked.
  std::int64_t rows_for(std::int64_t tokens) const {
    return tokens * (spec_.masked() ? spec_.num_experts : spec_.topk);
  }

  // One token: GEMM1 with each slot its own tile (no metadata), then GEMM2 and the combine in one
  // kernel writing y, its CTAs stashing their first slots' weights as they take the SMs GEMM1 leaves.
  void launch_one(std::span<const Buffer> b, CUstream stream, const LaunchHints& hints) const {
    const auto* weights = static_cast<const float*>(at(b, weights_));
    const auto* map = static_cast<const int*>(at(b, map_));
    const ExpertsGemmArgs g1{at(b, x_), at(b, w13_), at(b, b13_), weights, nullptr, nullptr, nullptr, h_.ptr(), 1, at(b, ids_), map};
    one_[0]->launch({static_cast<unsigned>(spec_.topk), static_cast<unsigned>(spec_.intermediate / kExpertsGemm1Columns), 1}, g1, stream,
                    pdl_ || hints.chained);
    const ExpertsGemmArgs g2{h_.ptr(), at(b, w2_), at(b, b2_), weights, nullptr, nullptr, nullptr, b[static_cast<std::size_t>(y_)].ptr, 1,
                             at(b, ids_), map, stash_regions_};
    one_[1]->launch({static_cast<unsigned>(spec_.hidden / kExpertsOneTokenColumns), 1, 1}, g2, stream, true);
  }

  // The most tiles of n rows the metadata can list: each active expert's rows in tiles of n.
  std::int64_t max_tiles(std::int64_t tokens, int n) const {
    if (spec_.masked()) return spec_.num_experts * ceil_div(tokens, n);
    const std::int64_t pairs = rows_for(tokens);
    return pairs / n + std::min<std::int64_t>(spec_.num_experts, pairs) + 1;
  }

  // The rows an active expert holds on average: the hint or T_max (masked), else the pairs over
  // the experts they can reach.
  std::int64_t rows_per_expert(std::int64_t tokens, const LaunchHints& hints) const {
    if (spec_.masked()) return hints.expected_rows > 0 ? std::min(hints.expected_rows, tokens) : tokens;
    const std::int64_t pairs = rows_for(tokens);
    return ceil_div(pairs, std::min<std::int64_t>(spec_.num_experts, pairs));
  }

  // The small tiles while the rows an active expert holds on average fit them (decode).
  int tile_rows(std::int64_t tokens, const LaunchHints& hints) const {
    return rows_per_expert(tokens, hints) <= kExpertsSmallTile ? kExpertsSmallTile : kExpertsLargeTile;
  }

  static const void* at(std::span<const Buffer> b, int index) { return index >= 0 ? b[static_cast<std::size_t>(index)].ptr : nullptr; }

  void do_launch(std::span<const Buffer> b, std::int64_t tokens, CUstream stream, const LaunchHints& hints) const override {
    if (tokens == 0) return;
    if (prefill_call(tokens, hints)) return launch_prefill(b, tokens, stream, hints);
    if (tokens == 1 && !spec_.masked()) return launch_one(b, stream, hints);
    const int n = tile_rows(tokens, hints);
    const int large = n == kExpertsLargeTile ? 1 : 0;
    const auto meta = launch_meta(b, tokens, n, stream, hints);
    auto* tiles = meta.tiles;
    auto* count = meta.tile_count;
    auto* sorted = meta.sorted;
    auto* position = meta.position;

    const auto grid_x = static_cast<unsigned>(max_tiles(tokens, n));
    const auto* weights = static_cast<const float*>(at(b, weights_));
    const ExpertsGemmArgs g1{at(b, x_), at(b, w13_), at(b, b13_), weights, sorted, tiles, count, h_.ptr(), tokens};
    gemm1_[large]->launch({grid_x, static_cast<unsigned>(spec_.intermediate / (kExpertsGemm1Columns * tiling_.groups1)), 1}, g1, stream, true);
    void* gemm2_out = spec_.masked() ? b[static_cast<std::size_t>(y_)].ptr : o_.ptr();
    const ExpertsGemmArgs g2{h_.ptr(), at(b, w2_), at(b, b2_), weights, sorted, tiles, count, gemm2_out, tokens};
    gemm2_[large]->launch({grid_x, static_cast<unsigned>(spec_.hidden / (kExpertsGemm2Columns * tiling_.groups2)), 1}, g2, stream, true);
    if (spec_.masked()) return;
    combine(b, tokens, position, stream);
  }

  const ExpertsSpec& spec_;
  ExpertsTiling tiling_;
  ExpertsPrefillTiling prefill_;
  bool pdl_;  ///< the metadata kernel's programmatic launch (Options); the rest always chain
  Options::ExpertsPath path_;
  const Driver& driver_;
  int sm_count_;
  std::int64_t crossover_ = 0;
  int stash_regions_ = 0;  ///< the one-token GEMM2's stash regions (experts_one_token_stash_regions)
  std::shared_ptr<const Kernel> meta_, combine_, gather_;
  std::shared_ptr<const Kernel> gemm1_[2], gemm2_[2];  ///< small tiles, large tiles
  std::shared_ptr<const Kernel> one_[2];               ///< one token: GEMM1, GEMM2 and the combine
  std::shared_ptr<const Kernel> prefill_gemm_[2];
  std::shared_ptr<const Kernel> sort_[3];  ///< count, scan, rank (prefill, standard layout)
  TmaMap a1_{}, a2_{};  ///< x' (in o) and h: workspace, fixed at load
  TmaMap c1_{}, c2_{};  ///< h and o (standard), as the epilogues store them
  /// The descriptors of the tensors the last prefill call passed: the weights, and masked x and y.
  mutable struct {
    CachedMap w13, w2, x, y;
  } maps_;
  int x_ = -1, ids_ = -1, weights_ = -1, counts_ = -1, w13_ = -1, w2_ = -1, b13_ = -1, b2_ = -1, map_ = -1, y_ = -1;
  DeviceBuffer sorted_, position_, tiles_, tile_count_, h_, o_, block_counts_;
};

}  // namespace

std::unique_ptr<Op> load_experts(Context& context, std::shared_ptr<const OpSpec> spec) {
  auto s = std::dynamic_pointer_cast<const ExpertsSpec>(spec);
  if (!s) throw Error({.kind = ErrorKind::internal, .message = "not an experts spec"});
  return std::make_unique<ExpertsOp>(context, std::move(s));
}

}  // namespace moejit::detail
