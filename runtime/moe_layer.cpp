// MoELayer: routing -> experts -> (latent tail) over one set of the caller's buffers and a
// workspace of its own (include/moejit/moe_layer.hpp).
#include <moejit/error.hpp>
#include <moejit/latent_moe.hpp>
#include <moejit/moe_layer.hpp>

#include "device.hpp"
#include "moe_layer.hpp"
#include "spec/ops/experts.hpp"
#include "spec/ops/latent_tail.hpp"
#include "spec/ops/routing.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>

namespace moejit {

namespace {

[[noreturn]] void refuse(const OpSpec& op, std::string message, std::string found, std::string expected) {
  throw Error({.kind = ErrorKind::usage, .message = fmt::format("MoELayer: op '{}': {}", op.name, message),
               .found = std::move(found), .expected = std::move(expected)});
}

template <class S>
const S& family_of(const std::shared_ptr<const OpSpec>& op, std::string_view family, std::string_view role) {
  const auto* s = dynamic_cast<const S*>(op.get());
  if (!s) {
    throw Error({.kind = ErrorKind::usage,
                 .message = op ? fmt::format("MoELayer: op '{}' cannot be its {}", op->name, role)
                               : fmt::format("MoELayer: no op for its {}", role),
                 .found = op ? std::string(op->family()) : "null", .expected = std::string(family)});
  }
  return *s;
}

// The index of the layer's tensor of this name, added if new.
int layer_tensor(detail::LayerSpec& s, const TensorDecl& d) {
  for (std::size_t i = 0; i < s.decls.size(); ++i) {
    if (s.decls[i].name != d.name) continue;
    s.decls[i].align = std::max(s.decls[i].align, d.align);  // what every op bound to it needs
    return static_cast<int>(i);
  }
  s.decls.push_back(d);
  return static_cast<int>(s.decls.size()) - 1;
}

}  // namespace

namespace detail {

std::string LayerSpec::canonical_json() const {
  nlohmann::json j{{"op", "moe_layer"}, {"router", nlohmann::json::parse(router->canonical_json())},
                   {"experts", nlohmann::json::parse(experts->canonical_json())}};
  if (tail) j["tail"] = nlohmann::json::parse(tail->canonical_json());
  return j.dump();
}

std::shared_ptr<const LayerSpec> layer_spec(std::shared_ptr<const OpSpec> router_op, std::shared_ptr<const OpSpec> experts_op,
                                            std::shared_ptr<const OpSpec> tail_op) {
  const auto& r = family_of<RoutingSpec>(router_op, "routing", "router");
  const auto& e = family_of<ExpertsSpec>(experts_op, "experts", "experts");
  if (e.masked()) refuse(e, "the experts of a layer take routed tokens", "layout masked", "layout standard");
  if (e.topk != r.topk) refuse(e, fmt::format("top-k differs from router '{}''s", r.name), std::to_string(e.topk), std::to_string(r.topk));
  if (e.id_range() != r.num_experts) {
    refuse(e, fmt::format("its ids range differs from router '{}''s experts", r.name), std::to_string(e.id_range()),
           fmt::format("{} (global_experts, or num_experts without an expert map)", r.num_experts));
  }
  if (e.ids_dtype != r.ids_dtype) {
    refuse(e, fmt::format("ids dtype differs from router '{}''s", r.name), std::string(spec_name(e.ids_dtype)),
           std::string(spec_name(r.ids_dtype)));
  }
  auto s = std::make_shared<LayerSpec>();
  s->name = fmt::format("{}+{}", r.name, e.name);
  s->router = router_op;
  s->experts = experts_op;
  s->max = e.max_tokens();
  if (tail_op) {
    const auto& t = family_of<LatentTailSpec>(tail_op, "latent_tail", "tail");
    if (t.latent != e.hidden) refuse(t, "its latent width is not the experts' hidden width", std::to_string(t.latent), std::to_string(e.hidden));
    if (e.dtype != DType::bf16) refuse(e, "a latent tail reads bf16", std::string(spec_name(e.dtype)), "bf16");
    s->tail = tail_op;
    s->name += "+" + t.name;
    s->max = std::min(s->max, t.max_tokens());
  }
  for (const auto& d : r.tensors()) {
    const bool written = d.role == TensorRole::output;
    s->sources[0].push_back({written ? -1 : layer_tensor(*s, d), !written ? Workspace::none : d.name == "ids" ? Workspace::ids : Workspace::weights});
  }
  for (const auto& d : e.tensors()) {
    if (d.name == "topk_ids" || d.name == "topk_weights") {
      s->sources[1].push_back({-1, d.name == "topk_ids" ? Workspace::ids : Workspace::weights});
    } else if (d.name == "y" && s->tail) {
      s->sources[1].push_back({-1, Workspace::routed});
    } else {
      auto decl = d;
      if (d.name == "y") decl.name = "out";
      s->sources[1].push_back({layer_tensor(*s, decl), Workspace::none});
    }
  }
  if (s->tail) {
    for (const auto& d : s->tail->tensors()) {
      if (d.name == "routed") s->sources[2].push_back({-1, Workspace::routed});
      else if (d.optional) s->sources[2].push_back({-1, Workspace::none});  // latent_sum, latent_norm: not bound
      else s->sources[2].push_back({layer_tensor(*s, d), Workspace::none});
    }
  }
  return s;
}

}  // namespace detail

struct MoELayer::Impl {
  static constexpr std::size_t kMaxTensors = 16;
  std::shared_ptr<const detail::LayerSpec> spec;
  std::unique_ptr<Op> router, experts, tail;
  detail::DeviceBuffer ids, weights, routed;

  // The buffers op `which` launches with, from the layer's and the workspace.
  std::array<Buffer, kMaxTensors> bind(int which, std::span<const Buffer> layer, std::size_t& count) const {
    std::array<Buffer, kMaxTensors> out{};
    const auto& sources = spec->sources[static_cast<std::size_t>(which)];
    count = sources.size();
    for (std::size_t i = 0; i < sources.size(); ++i) {
      const auto& src = sources[i];
      if (src.layer >= 0) out[i] = layer[static_cast<std::size_t>(src.layer)];
      else if (src.workspace == detail::Workspace::ids) out[i] = {ids.ptr(), ids.bytes()};
      else if (src.workspace == detail::Workspace::weights) out[i] = {weights.ptr(), weights.bytes()};
      else if (src.workspace == detail::Workspace::routed) out[i] = {routed.ptr(), routed.bytes()};
    }
    return out;
  }
};

MoELayer::MoELayer(Context& context, std::shared_ptr<const OpSpec> router, std::shared_ptr<const OpSpec> experts,
                   std::shared_ptr<const OpSpec> tail, Communicator* comm, Communicator* shared_comm)
    : Op(detail::layer_spec(std::move(router), std::move(experts), std::move(tail))), impl_(std::make_unique<Impl>()) {
  auto& m = *impl_;
  m.spec = std::static_pointer_cast<const detail::LayerSpec>(spec_ptr());
  if (m.spec->tail && m.spec->tail->ranks() > 1 && !comm) {
    throw Error({.kind = ErrorKind::usage, .message = fmt::format("MoELayer: tail '{}' spans {} GPUs: give it a communicator",
                                                                  m.spec->tail->name, m.spec->tail->ranks())});
  }
  context.make_current();
  m.router = context.load(m.spec->router);
  m.experts = context.load(m.spec->experts);
  if (m.spec->tail) m.tail = std::make_unique<LatentMoE>(context, m.spec->tail, comm, shared_comm);
  const auto& e = dynamic_cast<const ExpertsSpec&>(*m.spec->experts);
  const auto rows = static_cast<std::size_t>(m.spec->max * e.topk);
  m.ids = detail::DeviceBuffer(context.driver(), rows * size_of(e.ids_dtype));
  m.weights = detail::DeviceBuffer(context.driver(), rows * sizeof(float));
  if (m.tail) m.routed = detail::DeviceBuffer(context.driver(), static_cast<std::size_t>(m.spec->max * e.hidden) * size_of(e.dtype));
}

MoELayer::~MoELayer() = default;

const Op& MoELayer::router() const noexcept { return *impl_->router; }
const Op& MoELayer::experts() const noexcept { return *impl_->experts; }
const Op* MoELayer::tail() const noexcept { return impl_->tail.get(); }

void MoELayer::do_launch(std::span<const Buffer> buffers, std::int64_t tokens, CUstream stream, const LaunchHints& hints) const {
  const auto& m = *impl_;
  std::size_t n = 0;
  auto b = m.bind(0, buffers, n);
  m.router->launch({b.data(), n}, tokens, stream, hints);
  // NOTE: the kernel before each next op is this layer's own: it may start early and wait on the GPU.
  LaunchHints chained = hints;
  chained.chained = true;
  b = m.bind(1, buffers, n);
  m.experts->launch({b.data(), n}, tokens, stream, chained);
  if (!m.tail) return;
  b = m.bind(2, buffers, n);
  m.tail->launch({b.data(), n}, tokens, stream, chained);
}

}  // namespace moejit
