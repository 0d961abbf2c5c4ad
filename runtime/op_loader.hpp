#pragma once
// The runtime's table of op families (spec/ops/registry.hpp says the shape): each family's loader.

#include <moejit/context.hpp>
#include <moejit/op.hpp>

#include "spec/ops/registry.hpp"

#include <memory>

namespace moejit::detail {

using LoadOp = std::unique_ptr<Op> (*)(Context& context, std::shared_ptr<const OpSpec> spec);
std::span<const Family<LoadOp>> runtime_families() noexcept;
/// Loads `spec` through its family's loader.
std::unique_ptr<Op> load_op(Context& context, std::shared_ptr<const OpSpec> spec);

std::unique_ptr<Op> load_activation(Context& context, std::shared_ptr<const OpSpec> spec);
std::unique_ptr<Op> load_routing(Context& context, std::shared_ptr<const OpSpec> spec);
std::unique_ptr<Op> load_latent_tail(Context& context, std::shared_ptr<const OpSpec> spec);
std::unique_ptr<Op> load_experts(Context& context, std::shared_ptr<const OpSpec> spec);

}  // namespace moejit::detail
