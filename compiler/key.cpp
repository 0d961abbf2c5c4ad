#include "key.hpp"

#include "embedded_templates.hpp"

#include <xxhash.h>

#include <fmt/format.h>

#include <charconv>

namespace moejit::detail {

std::string Key::hex() const { return fmt::format("{:016x}{:016x}", hi, lo); }

std::optional<Key> Key::from_hex(std::string_view text) noexcept {
  if (text.size() != 32) return std::nullopt;
  Key k;
  auto parse = [](std::string_view part, std::uint64_t& out) {
    auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), out, 16);
    return ec == std::errc() && end == part.data() + part.size();
  };
  if (!parse(text.substr(0, 16), k.hi) || !parse(text.substr(16), k.lo)) return std::nullopt;
  return k;
}

KeyInputs key_inputs(const Contract& contract, const Toolchain& toolchain) {
  return KeyInputs{
      .contract_text = contract.text(),
      .template_hash = std::string(find_template(contract.template_name()).closure_hash),
      .arch = contract.arch(),
      .nvrtc_version = toolchain.nvrtc_version,
      .options = toolchain.options,
  };
}

Key make_key(const KeyInputs& in) {
  // NOTE: every part is length-prefixed, so no two different inputs encode alike.
  XXH3_state_t* state = XXH3_createState();
  XXH3_128bits_reset(state);
  auto add = [&](std::string_view part) {
    const std::uint64_t size = part.size();
    XXH3_128bits_update(state, &size, sizeof size);
    XXH3_128bits_update(state, part.data(), part.size());
  };
  add(fmt::format("schema {}", in.schema_version));
  add(in.contract_text);
  add(in.template_hash);
  add(in.arch);
  add(in.nvrtc_version);
  for (const auto& o : in.options) add(o);
  const XXH128_hash_t h = XXH3_128bits_digest(state);
  XXH3_freeState(state);
  return Key{h.high64, h.low64};
}

}  // namespace moejit::detail
