#pragma once
/// The latent-MoE tail of a spec's `latent_tail` op, for one tensor-parallel rank: all-reduce of
/// the routed latent partials (before the norm), RMSNorm, up projection with the shared-expert
/// output added. Every rank calls launch() for the same token count; the call is collective.

#include <moejit/collectives.hpp>
#include <moejit/context.hpp>
#include <moejit/op.hpp>

#include <functional>
#include <memory>
#include <thread>
#include <vector>

namespace moejit {

class LatentMoE final : public Op {
 public:
  enum class Path { fused, base_full, base_striped };

  /// `spec` is a `latent_tail` op of a spec (e.g. `load_spec(file).ops[i]`); any other op is a
  /// usage error. tp_size 1 needs no communicator. For tp_size > 1, `comm` is this rank's
  /// communicator, and `shared_comm` (optional, the same ranks) lets the shared-expert all-gather
  /// overlap the routed one on a second stream. Construction is collective when the fused path
  /// is possible (the ranks exchange their peer buffers through `comm`).
  LatentMoE(Context& context, std::shared_ptr<const OpSpec> spec, Communicator* comm = nullptr,
            Communicator* shared_comm = nullptr);
  ~LatentMoE() override;

  /// The path a call with `tokens` tokens takes.
  Path path_for(std::int64_t tokens) const noexcept;
  /// Throws moejit::Error (nccl) if a peer did not arrive in time in an earlier call (the tail is
  /// then unusable) or NCCL reported an asynchronous error.
  void check() const;

 private:
  void do_launch(std::span<const Buffer> buffers, std::int64_t tokens, CUstream stream, const LaunchHints& hints) const override;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

std::string_view to_string(LatentMoE::Path path) noexcept;

/// One process driving tp GPUs (devices 0..tp-1 unless given): a Context, a Communicator
/// (ncclCommInitAll), a second communicator for the shared all-gather and a LatentMoE per rank.
/// Each rank's calls run on a thread of its own, as NCCL wants.
class LatentMoEGroup {
 public:
  /// `spec`: a `latent_tail` op, as for LatentMoE.
  LatentMoEGroup(std::shared_ptr<const OpSpec> spec, Options options, std::vector<int> devices = {});
  ~LatentMoEGroup();

  int size() const noexcept { return static_cast<int>(contexts_.size()); }
  Context& context(int rank) { return *contexts_[static_cast<std::size_t>(rank)]; }
  LatentMoE& tail(int rank) { return *tails_[static_cast<std::size_t>(rank)]; }
  /// Runs fn(rank) for every rank, each on its own thread with its device current; rethrows
  /// the first exception.
  void run(const std::function<void(int rank)>& fn);

 private:
  std::vector<std::unique_ptr<Context>> contexts_;
  std::vector<Communicator> comms_, shared_comms_;
  std::vector<std::unique_ptr<LatentMoE>> tails_;
};

}  // namespace moejit
