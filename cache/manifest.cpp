#include "manifest.hpp"

#include <moejit/error.hpp>

#include <xxhash.h>

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <optional>
#include <utility>

namespace moejit::detail {

using nlohmann::json;

std::string checksum(std::string_view data) {
  const XXH128_hash_t h = XXH3_128bits(data.data(), data.size());
  return fmt::format("{:016x}{:016x}", h.high64, h.low64);
}

std::string utc_now() {
  return fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", fmt::gmtime(std::chrono::system_clock::to_time_t(std::chrono::system_clock::now())));
}

namespace {

// NOTE: the manifest's own checksum covers every byte of its text (kernel table, created,
// compile_seconds, even the spacing): XXH3-128 of the file as written with the checksum's 32
// digits read as zeros. A reader checks the bytes it read before parsing them, with no second
// serialization to hash (that, and the parse, were most of a warm start).
constexpr const char* kSelfChecksum = "manifest_xxh3_128";
constexpr std::string_view kSelfChecksumField = "\"manifest_xxh3_128\": \"";  // as dump(2) writes it
constexpr std::size_t kChecksumDigits = 32;

// The text with its self-checksum's digits as zeros, and where they start; none when the text
// does not hold the field exactly once (a quote inside a JSON string is escaped, so the field's
// text can only be the key itself).
std::optional<std::pair<std::string, std::size_t>> zeroed_checksum(std::string_view text) {
  const auto at = text.find(kSelfChecksumField);
  if (at == std::string_view::npos || text.find(kSelfChecksumField, at + 1) != std::string_view::npos) return std::nullopt;
  const auto digits = at + kSelfChecksumField.size();
  if (text.size() < digits + kChecksumDigits) return std::nullopt;
  std::string zeroed(text);
  zeroed.replace(digits, kChecksumDigits, kChecksumDigits, '0');
  return std::pair{std::move(zeroed), digits};
}

json fields_of(const Manifest& m) {
  json kernels_json = json::array();
  for (const auto& k : m.kernels) {
    kernels_json.push_back({{"name_expression", k.name_expression},
                            {"lowered_name", k.lowered_name},
                            {"registers", k.resources.registers},
                            {"shared_bytes", k.resources.shared_bytes},
                            {"stack_bytes", k.resources.stack_bytes},
                            {"spill_store_bytes", k.resources.spill_store_bytes},
                            {"spill_load_bytes", k.resources.spill_load_bytes},
                            {"barriers", k.resources.barriers},
                            {"wgmma_serialized", k.resources.wgmma_serialized}});
  }
  return json{{"schema", m.inputs.schema_version},
              {"key", m.key.hex()},
              {"contract", m.inputs.contract_text},
              {"template_hash", m.inputs.template_hash},
              {"arch", m.inputs.arch},
              {"nvrtc", m.inputs.nvrtc_version},
              {"options", m.inputs.options},
              {"cubin", {{"file", "kernel.cubin"}, {"bytes", m.cubin_bytes}, {"xxh3_128", m.cubin_checksum}}},
              {"kernels", kernels_json},
              {"compile_seconds", m.compile_seconds},
              {"created", m.created}};
}

[[noreturn]] void malformed(std::string found) {
  throw Error({.kind = ErrorKind::cache, .message = "malformed manifest", .found = std::move(found)});
}

// NOTE: a manifest nests 3 levels; a deeper one is refused before parsing, because nlohmann's
// dump() recurses once a level and a crafted one (an imported bundle's) could exhaust the stack.
constexpr int kMaxManifestDepth = 8;

bool nests_deeper(std::string_view text, int limit) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

}  // namespace

std::string Manifest::to_json() const {
  json j = fields_of(*this);
  j[kSelfChecksum] = std::string(kChecksumDigits, '0');
  auto text = j.dump(2) + "\n";
  const auto digits = text.find(kSelfChecksumField) + kSelfChecksumField.size();
  text.replace(digits, kChecksumDigits, checksum(text));
  return text;
}

Manifest Manifest::from_json(std::string_view text) {
  if (nests_deeper(text, kMaxManifestDepth)) malformed(fmt::format("nested deeper than {} levels", kMaxManifestDepth));
  const auto zeroed = zeroed_checksum(text);
  if (!zeroed) malformed(fmt::format("not exactly one {} field", kSelfChecksum));
  const auto sum = text.substr(zeroed->second, kChecksumDigits);
  if (checksum(zeroed->first) != sum) {
    throw Error({.kind = ErrorKind::cache, .message = "manifest checksum mismatch", .expected = "the manifest as it was written"});
  }
  json j;
  try {
    j = json::parse(text);
    if (!j.is_object()) malformed("not a JSON object");
    if (j.at(kSelfChecksum).get<std::string>() != sum) malformed(fmt::format("a {} field nested below the top", kSelfChecksum));
  } catch (const json::exception& e) {
    malformed(e.what());
  }
  try {
    Manifest m;
    auto key = Key::from_hex(j.at("key").get<std::string>());
    if (!key) malformed("a key that is not 32 hex digits");
    m.key = *key;
    m.inputs.schema_version = j.at("schema").get<int>();
    m.inputs.contract_text = j.at("contract").get<std::string>();
    m.inputs.template_hash = j.at("template_hash").get<std::string>();
    m.inputs.arch = j.at("arch").get<std::string>();
    m.inputs.nvrtc_version = j.at("nvrtc").get<std::string>();
    m.inputs.options = j.at("options").get<std::vector<std::string>>();
    m.cubin_bytes = j.at("cubin").at("bytes").get<std::uint64_t>();
    m.cubin_checksum = j.at("cubin").at("xxh3_128").get<std::string>();
    for (const auto& k : j.at("kernels")) {
      m.kernels.push_back({k.at("name_expression").get<std::string>(), k.at("lowered_name").get<std::string>(),
                           KernelResources{k.at("registers").get<int>(), k.at("shared_bytes").get<int>(),
                                           k.at("stack_bytes").get<int>(), k.at("spill_store_bytes").get<int>(),
                                           k.at("spill_load_bytes").get<int>(), k.at("barriers").get<int>(),
                                           k.value("wgmma_serialized", false)}});  // absent before it was recorded
    }
    m.compile_seconds = j.at("compile_seconds").get<double>();
    m.created = j.at("created").get<std::string>();
    return m;
  } catch (const json::exception& e) {
    malformed(e.what());
  }
}

}  // namespace moejit::detail
