#pragma once
// The layer an MoELayer runs, as one op (runtime/moe_layer.cpp): its tensors and where each of
// its ops' tensors comes from at launch.

#include <moejit/spec.hpp>

#include <array>
#include <memory>
#include <string>
#include <vector>

namespace moejit::detail {

// Where an op's tensor comes from at launch: one of the layer's buffers, or the workspace.
enum class Workspace { none, ids, weights, routed };
struct Source {
  int layer = -1;
  Workspace workspace = Workspace::none;
};

// The layer as one op: the routing op's inputs, the experts' inputs but the ids and weights
// routing writes, the tail's inputs but the routed latent the experts write, and one output.
struct LayerSpec final : OpSpec {
  std::shared_ptr<const OpSpec> router, experts, tail;
  std::vector<TensorDecl> decls;
  std::array<std::vector<Source>, 3> sources;  // router, experts, tail: one a tensor of the op
  std::int64_t max = 0;

  std::string_view family() const noexcept override { return "moe_layer"; }
  std::string canonical_json() const override;
  std::vector<TensorDecl> tensors() const override { return decls; }
  std::int64_t max_tokens() const noexcept override { return max; }
  int ranks() const noexcept override { return tail ? tail->ranks() : 1; }
};

/// The layer of these ops; a usage error naming the op and the field where they do not fit
/// together (moejit/moe_layer.hpp says what must).
std::shared_ptr<const LayerSpec> layer_spec(std::shared_ptr<const OpSpec> router, std::shared_ptr<const OpSpec> experts,
                                            std::shared_ptr<const OpSpec> tail);

}  // namespace moejit::detail
