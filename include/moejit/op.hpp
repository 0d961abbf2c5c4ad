#pragma once
/// A loaded op: launch it on a stream with one device buffer per declared tensor.

#include <moejit/spec.hpp>
#include <moejit/tensor.hpp>

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace moejit {

/// What a caller knows of a call's data that the op cannot see before the GPU reads it. A hint
/// only chooses launch geometry: results are the same with or without it.
struct LaunchHints {
  /// Rows an expert typically holds in a masked layout (as DeepGEMM's expected_m); 0: unknown.
  std::int64_t expected_rows = 0;
  /// The kernel before this call on the stream is moejit's own (it lets dependents in): the
  /// op's first kernel may then start early and wait for it on the GPU (programmatic dependent
  /// launch), as with Options::programmatic_launch.
  bool chained = false;
};

class Op {
 public:
  virtual ~Op() = default;
  Op(const Op&) = delete;
  Op& operator=(const Op&) = delete;

  const OpSpec& spec() const noexcept { return *spec_; }
  /// The tensors in launch order (OpSpec::tensors()).
  const std::vector<TensorDecl>& tensors() const noexcept { return tensors_; }

  /// Launches the op for `tokens` tokens on `stream`; legal inside CUDA graph capture, and
  /// allocation-free. `buffers[i]` binds tensors()[i]; an optional tensor may be left empty.
  /// Throws moejit::Error (input) when a buffer is missing, holds fewer bytes than `tokens` needs
  /// (a token count past the caller's buffers is an error, never a write past the end) or is not
  /// aligned as its TensorDecl says. One op object serves one stream and one host thread at a
  /// time: its workspaces (and, for some ops, host-side descriptors) are its own; load the op
  /// again for another stream.
  void launch(std::span<const Buffer> buffers, std::int64_t tokens, CUstream stream, const LaunchHints& hints = {}) const;

 protected:
  explicit Op(std::shared_ptr<const OpSpec> spec);
  const std::shared_ptr<const OpSpec>& spec_ptr() const noexcept { return spec_; }
  virtual void do_launch(std::span<const Buffer> buffers, std::int64_t tokens, CUstream stream,
                         const LaunchHints& hints) const = 0;

 private:
  std::shared_ptr<const OpSpec> spec_;
  std::vector<TensorDecl> tensors_;
};

}  // namespace moejit
