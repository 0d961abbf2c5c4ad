// Launcher of the routing op (templates/routing.cuh): the block-per-token or the warp-per-token
// kernel by token count, at the crossover in runtime/routing_crossover.json (measured data, with
// the command that re-measures it); grouped routing beyond the block kernel's sizes has the warp
// kernel only, and a contract with the lazy-keys warp kernel takes it up to that file's
// lazy_keys_max_tokens.
#include <moejit/error.hpp>

#include "compiler/ops/routing.hpp"
#include "kernel.hpp"
#include "op_loader.hpp"
#include "routing_op.hpp"
#include "templates/routing_args.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <limits>

namespace moejit::detail {

std::string_view routing_crossover_json();

const nlohmann::json& routing_crossover_data() {
  static const nlohmann::json data = nlohmann::json::parse(routing_crossover_json());
  return data;
}

std::int64_t lazy_keys_max_tokens(const nlohmann::json& data) { return data.at("lazy_keys_max_tokens").get<std::int64_t>(); }

std::int64_t crossover_tokens(const nlohmann::json& data, const RoutingSpec& s) {
  std::int64_t best = data.at("default_crossover_tokens").get<std::int64_t>();
  double best_distance = std::numeric_limits<double>::infinity();
  for (const auto& e : data.at("entries")) {
    if (e.value("grouped", false) != s.grouped()) continue;
    const double distance = std::fabs(std::log2(e.at("num_experts").get<double>() / s.num_experts)) * 64 +
                            std::fabs(e.at("topk").get<double>() - s.topk);
    if (distance < best_distance) {
      best_distance = distance;
      best = e.at("crossover_tokens").get<std::int64_t>();
    }
  }
  return best;
}

namespace {

class RoutingOp final : public Op {
 public:
  RoutingOp(Context& context, std::shared_ptr<const RoutingSpec> spec)
      : Op(spec), spec_(*spec), pdl_(context.options().programmatic_launch) {
    const auto contract = contracts(*spec, context.device().arch).front();
    const auto t = routing_tiling(*spec);
    auto load = [&](std::string_view role, int warps) -> std::shared_ptr<const Kernel> {
      if (!contract.has_kernel(role)) return nullptr;
      auto kernel = context.kernel(contract, role);
      kernel->set_block({static_cast<unsigned>(32 * warps), 1, 1});
      return kernel;
    };
    warp_vectors_ = load(kRoutingWarpVectors, t.warps_per_block);
    warp_ = load(kRoutingWarpElements, t.warps_per_block);
    block_ = load(kRoutingBlock, t.block_warps);
    warp_lazy_ = load(kRoutingWarpLazy, t.warps_per_block);
    if (warp_) {
      tokens_per_block_ = t.warps_per_block * (32 / t.lanes);
      const auto vec = static_cast<std::size_t>(t.warp_vec);
      logits_vector_bytes_ = vec * size_of(spec->logits_dtype);
      bias_vector_bytes_ = spec->bias ? vec * size_of(*spec->bias) : 1;
    }
    if (warp_lazy_) lazy_max_tokens_ = lazy_keys_max_tokens(routing_crossover_data());
    switch (spec->single_group_kernel) {
      case SingleGroupKernel::block: crossover_ = std::numeric_limits<std::int64_t>::max(); break;
      case SingleGroupKernel::warp: crossover_ = 0; break;
      case SingleGroupKernel::automatic: crossover_ = block_ && warp_ ? crossover_tokens(routing_crossover_data(), *spec) : (block_ ? std::numeric_limits<std::int64_t>::max() : 0);
    }
  }

 private:
  void do_launch(std::span<const Buffer> b, std::int64_t tokens, CUstream stream, const LaunchHints& hints) const override {
    if (tokens == 0) return;
    const bool bias = spec_.bias.has_value();
    RoutingArgs args{b[0].ptr, bias ? b[1].ptr : nullptr, static_cast<float*>(b[bias ? 2 : 1].ptr), b[bias ? 3 : 2].ptr, tokens};
    if (tokens <= crossover_) {
      block_->launch({static_cast<unsigned>(tokens), 1, 1}, args, stream, pdl_ || hints.chained);
    } else {
      const bool vectors = warp_vectors_ && reinterpret_cast<std::uintptr_t>(args.logits) % logits_vector_bytes_ == 0 &&
                           reinterpret_cast<std::uintptr_t>(args.bias) % bias_vector_bytes_ == 0;
      const auto& warp = !vectors ? warp_ : (warp_lazy_ && tokens <= lazy_max_tokens_ ? warp_lazy_ : warp_vectors_);
      warp->launch({static_cast<unsigned>((tokens + tokens_per_block_ - 1) / tokens_per_block_), 1, 1}, args, stream, pdl_ || hints.chained);
    }
  }

  const RoutingSpec& spec_;
  bool pdl_;  ///< programmatic dependent launch (Options::programmatic_launch)
  std::shared_ptr<const Kernel> warp_vectors_, warp_, block_;  ///< warp_: element-by-element loads
  std::shared_ptr<const Kernel> warp_lazy_;  ///< vector loads, lazy keys (RoutingTiling::warp_lazy)
  std::int64_t lazy_max_tokens_ = 0;
  std::int64_t tokens_per_block_ = 1;
  std::size_t logits_vector_bytes_ = 1, bias_vector_bytes_ = 1;  ///< alignment warp_vectors_ needs
  std::int64_t crossover_ = 0;
};

}  // namespace

std::unique_ptr<Op> load_routing(Context& context, std::shared_ptr<const OpSpec> spec) {
  auto s = std::dynamic_pointer_cast<const RoutingSpec>(spec);
  if (!s) throw Error({.kind = ErrorKind::internal, .message = "not a routing spec"});
  return std::make_unique<RoutingOp>(context, std::move(s));
}

}  // namespace moejit::detail
