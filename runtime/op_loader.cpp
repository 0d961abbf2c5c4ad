#include "op_loader.hpp"

#include <moejit/error.hpp>

namespace moejit::detail {

std::unique_ptr<Op> load_op(Context& context, std::shared_ptr<const OpSpec> spec) {
  const auto family = spec->family();
  if (family == "activation") return load_activation(context, std::move(spec));
  if (family == "routing") return load_routing(context, std::move(spec));
  if (family == "latent_tail") return load_latent_tail(context, std::move(spec));
  throw Error({.kind = ErrorKind::usage, .message = "no runtime for op family", .found = std::string(family)});
}

}  // namespace moejit::detail
