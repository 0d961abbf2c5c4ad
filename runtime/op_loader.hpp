#pragma once
// The runtime side of each op family. Adding an op adds one line to op_loader.cpp.

#include <moejit/context.hpp>
#include <moejit/op.hpp>

#include <memory>

namespace moejit::detail {

std::unique_ptr<Op> load_op(Context& context, std::shared_ptr<const OpSpec> spec);

std::unique_ptr<Op> load_activation(Context& context, std::shared_ptr<const OpSpec> spec);
std::unique_ptr<Op> load_routing(Context& context, std::shared_ptr<const OpSpec> spec);
std::unique_ptr<Op> load_latent_tail(Context& context, std::shared_ptr<const OpSpec> spec);

}  // namespace moejit::detail
