#include <moejit/error.hpp>
#include <moejit/op.hpp>

#include <fmt/format.h>

namespace moejit {

Op::Op(std::shared_ptr<const OpSpec> spec) : spec_(std::move(spec)), tensors_(spec_->tensors()) {}

void Op::launch(std::span<const Buffer> buffers, std::int64_t tokens, CUstream stream, const LaunchHints& hints) const {
  // NOTE: the checks allocate only when they fail; the success path is allocation-free.
  if (buffers.size() != tensors_.size()) {
    throw Error({.kind = ErrorKind::usage, .message = fmt::format("op '{}' takes one buffer per tensor", spec_->name),
                 .found = std::to_string(buffers.size()), .expected = std::to_string(tensors_.size())});
  }
  // Kernels index tokens in 32 bits (the routing kernel's token of a warp, grid sizes).
  constexpr std::int64_t kLimit = std::int64_t{1} << 31;
  const auto max = spec_->max_tokens();
  if (tokens < 0 || tokens >= kLimit || (max > 0 && tokens > max)) {
    throw Error({.kind = ErrorKind::input, .message = fmt::format("op '{}': token count out of range", spec_->name),
                 .found = std::to_string(tokens),
                 .expected = max > 0 ? fmt::format("0 to {} (max_tokens)", max) : fmt::format("0 to {}", kLimit - 1)});
  }
  if (hints.expected_rows < 0) {
    throw Error({.kind = ErrorKind::input, .message = fmt::format("op '{}': negative expected rows hint", spec_->name),
                 .found = std::to_string(hints.expected_rows), .expected = "0 (unknown) or more"});
  }
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    const auto& t = tensors_[i];
    if (!buffers[i].ptr) {
      if (t.optional) continue;
      throw Error({.kind = ErrorKind::input, .message = fmt::format("op '{}': tensor '{}' is not bound", spec_->name, t.name),
                   .pointer = t.name, .expected = fmt::format("{} {} {}", t.name, t.shape_text(), numpy_name(t.dtype))});
    }
    // NOTE: a misaligned access faults on the GPU and ends the context: refuse it here.
    const auto address = reinterpret_cast<std::uintptr_t>(buffers[i].ptr);
    if (address % size_of(t.dtype) != 0) {
      throw Error({.kind = ErrorKind::input,
                   .message = fmt::format("op '{}': buffer of tensor '{}' is not aligned to its element", spec_->name, t.name),
                   .pointer = t.name, .found = fmt::format("address {}", buffers[i].ptr),
                   .expected = fmt::format("a multiple of {} bytes ({})", size_of(t.dtype), numpy_name(t.dtype))});
    }
    if (t.align > 0 && address % t.align != 0) {
      throw Error({.kind = ErrorKind::input,
                   .message = fmt::format("op '{}': buffer of tensor '{}' is not aligned for the kernels' vector accesses", spec_->name, t.name),
                   .pointer = t.name, .found = fmt::format("address {}", buffers[i].ptr),
                   .expected = fmt::format("a multiple of {} bytes", t.align)});
    }
    const auto need = t.bytes_for(tokens);
    if (buffers[i].bytes < need) {
      throw Error({.kind = ErrorKind::input,
                   .message = fmt::format("op '{}': buffer of tensor '{}' is too small for {} tokens", spec_->name, t.name, tokens),
                   .pointer = t.name, .found = fmt::format("{} bytes", buffers[i].bytes),
                   .expected = fmt::format("at least {} bytes ({} {})", need, t.shape_text(), numpy_name(t.dtype))});
    }
  }
  do_launch(buffers, tokens, stream, hints);
}

}  // namespace moejit
