#include "op_loader.hpp"

#include <moejit/error.hpp>

namespace moejit::detail {

std::span<const Family<LoadOp>> runtime_families() noexcept {
  static constexpr Family<LoadOp> kFamilies[] = {
      {"activation", &load_activation},
      {"routing", &load_routing},
      {"latent_tail", &load_latent_tail},
      {"experts", &load_experts},
  };
  return kFamilies;
}

std::unique_ptr<Op> load_op(Context& context, std::shared_ptr<const OpSpec> spec) {
  if (const auto* f = find_family(runtime_families(), spec->family())) return f->entry(context, std::move(spec));
  throw Error({.kind = ErrorKind::usage, .message = "no runtime for op family", .found = std::string(spec->family())});
}

}  // namespace moejit::detail
