#pragma once
/// A whole MoE layer in one call: routing -> the experts (metadata, GEMM1 with the activation,
/// GEMM2 with the router weight, combine) -> optionally the latent tail, each kernel chained to
/// the one before with programmatic dependent launch. The ids and weights between routing and
/// the experts (and the experts' output a tail reads) live in a workspace the layer allocates
/// when it is built, for its max_tokens: a launch allocates nothing and is legal in CUDA graph
/// capture. Launch one layer object on one stream at a time.

#include <moejit/collectives.hpp>
#include <moejit/context.hpp>
#include <moejit/op.hpp>

#include <memory>

namespace moejit {

class MoELayer final : public Op {
 public:
  /// `router`: a routing op; `experts`: an experts op of the standard layout whose top-k, id
  /// range and ids dtype are the router's; `tail` (optional): a latent_tail op whose latent width
  /// is the experts' hidden width, with `comm` (and `shared_comm`) for tp_size > 1, as LatentMoE
  /// takes them. Anything else is a usage error naming the op and the field.
  MoELayer(Context& context, std::shared_ptr<const OpSpec> router, std::shared_ptr<const OpSpec> experts,
           std::shared_ptr<const OpSpec> tail = nullptr, Communicator* comm = nullptr, Communicator* shared_comm = nullptr);
  ~MoELayer() override;

  /// The layer's ops, loaded on the same context (to run them one by one).
  const Op& router() const noexcept;
  const Op& experts() const noexcept;
  const Op* tail() const noexcept;

 private:
  void do_launch(std::span<const Buffer> buffers, std::int64_t tokens, CUstream stream, const LaunchHints& hints) const override;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace moejit
