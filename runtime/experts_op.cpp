// Launcher of the experts op (templates/experts.cuh): the metadata, GEMM1, GEMM2 and combine
// kernels chained with programmatic dependent launch, over a workspace the op allocates at load
// for its spec's max_tokens, so that a launch allocates nothing and is legal in graph capture.
#include <moejit/error.hpp>

#include "compiler/ops/experts.hpp"
#include "device.hpp"
#include "kernel.hpp"
#include "op_loader.hpp"
#include "templates/experts_args.h"

#include <algorithm>
#include <string_view>

namespace moejit::detail {

namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// The index of the tensor called `name` in the op's launch order, or -1.
int tensor_index(const std::vector<TensorDecl>& tensors, std::string_view name) {
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

class ExpertsOp final : public Op {
 public:
  ExpertsOp(Context& context, std::shared_ptr<const ExpertsSpec> spec)
      : Op(spec), spec_(*spec), tiling_(experts_tiling(*spec)), pdl_(context.options().programmatic_launch) {
    const auto contract = contracts(*spec, context.device().arch).front();
    auto load = [&](std::string_view role, int threads) {
      auto kernel = context.kernel(contract, role);
      kernel->set_block({static_cast<unsigned>(threads), 1, 1}, 0);
      return kernel;
    };
    meta_ = load(kExpertsMeta, kExpertsMetaThreads);
    const int threads1 = 32 * tiling_.groups1 * tiling_.split1, threads2 = 32 * tiling_.groups2 * tiling_.split2;
    gemm1_[0] = load(kExpertsGemm1Small, threads1);
    gemm1_[1] = load(kExpertsGemm1Large, threads1);
    gemm2_[0] = load(kExpertsGemm2Small, threads2);
    gemm2_[1] = load(kExpertsGemm2Large, threads2);
    if (!spec_.masked()) combine_ = load(kExpertsCombine, kExpertsCombineThreads);
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
    tile_count_ = DeviceBuffer(driver, 4);
    h_ = DeviceBuffer(driver, static_cast<std::size_t>(rows * spec_.intermediate) * size_of(spec_.dtype));
  }

  // GEMM rows of a call: (token, slot) pairs, or every expert's T_max rows when masked.
  std::int64_t rows_for(std::int64_t tokens) const {
    return tokens * (spec_.masked() ? spec_.num_experts : spec_.topk);
  }

  // The most tiles of n rows the metadata can list: each active expert's rows in tiles of n.
  std::int64_t max_tiles(std::int64_t tokens, int n) const {
    if (spec_.masked()) return spec_.num_experts * ceil_div(tokens, n);
    const std::int64_t pairs = rows_for(tokens);
    return pairs / n + std::min<std::int64_t>(spec_.num_experts, pairs) + 1;
  }

  // The small tiles while the rows an active expert holds on average fit them (decode).
  int tile_rows(std::int64_t tokens, const LaunchHints& hints) const {
    std::int64_t per_expert = 0;
    if (spec_.masked()) {
      per_expert = hints.expected_rows > 0 ? std::min(hints.expected_rows, tokens) : tokens;
    } else {
      const std::int64_t pairs = rows_for(tokens);
      per_expert = ceil_div(pairs, std::min<std::int64_t>(spec_.num_experts, pairs));
    }
    return per_expert <= kExpertsSmallTile ? kExpertsSmallTile : kExpertsLargeTile;
  }

  static const void* at(std::span<const Buffer> b, int index) { return index >= 0 ? b[static_cast<std::size_t>(index)].ptr : nullptr; }

  void do_launch(std::span<const Buffer> b, std::int64_t tokens, CUstream stream, const LaunchHints& hints) const override {
    if (tokens == 0) return;
    const int n = tile_rows(tokens, hints);
    const int large = n == kExpertsLargeTile ? 1 : 0;
    auto* tiles = static_cast<ExpertsTile*>(tiles_.ptr());
    auto* count = static_cast<int*>(tile_count_.ptr());
    auto* sorted = static_cast<int*>(sorted_.ptr());
    auto* position = static_cast<int*>(position_.ptr());
    const ExpertsMetaArgs meta{at(b, ids_), static_cast<const int*>(at(b, map_)), static_cast<const int*>(at(b, counts_)),
                               tokens, n, sorted, position, tiles, count};
    meta_->launch({1, 1, 1}, meta, stream, pdl_ || hints.chained);

    const auto grid_x = static_cast<unsigned>(max_tiles(tokens, n));
    const auto* weights = static_cast<const float*>(at(b, weights_));
    const ExpertsGemmArgs g1{at(b, x_), at(b, w13_), at(b, b13_), weights, sorted, tiles, count, h_.ptr(), tokens};
    gemm1_[large]->launch({grid_x, static_cast<unsigned>(spec_.intermediate / (8 * tiling_.groups1)), 1}, g1, stream, true);
    void* gemm2_out = spec_.masked() ? b[static_cast<std::size_t>(y_)].ptr : o_.ptr();
    const ExpertsGemmArgs g2{h_.ptr(), at(b, w2_), at(b, b2_), weights, sorted, tiles, count, gemm2_out, tokens};
    gemm2_[large]->launch({grid_x, static_cast<unsigned>(spec_.hidden / (16 * tiling_.groups2)), 1}, g2, stream, true);
    if (spec_.masked()) return;
    const ExpertsCombineArgs c{o_.ptr(), position, b[static_cast<std::size_t>(y_)].ptr, tokens};
    const auto vectors = tokens * (spec_.hidden / 8);
    combine_->launch({static_cast<unsigned>(ceil_div(vectors, kExpertsCombineThreads)), 1, 1}, c, stream, true);
  }

  const ExpertsSpec& spec_;
  ExpertsTiling tiling_;
  bool pdl_;  ///< the metadata kernel's programmatic launch (Options); the rest always chain
  std::shared_ptr<const Kernel> meta_, combine_;
  std::shared_ptr<const Kernel> gemm1_[2], gemm2_[2];  ///< small tiles, large tiles
  int x_ = -1, ids_ = -1, weights_ = -1, counts_ = -1, w13_ = -1, w2_ = -1, b13_ = -1, b2_ = -1, map_ = -1, y_ = -1;
  DeviceBuffer sorted_, position_, tiles_, tile_count_, h_, o_;
};

}  // namespace

std::unique_ptr<Op> load_experts(Context& context, std::shared_ptr<const OpSpec> spec) {
  auto s = std::dynamic_pointer_cast<const ExpertsSpec>(spec);
  if (!s) throw Error({.kind = ErrorKind::internal, .message = "not an experts spec"});
  return std::make_unique<ExpertsOp>(context, std::move(s));
}

}  // namespace moejit::detail
