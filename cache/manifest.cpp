#include "manifest.hpp"

#include <moejit/error.hpp>

#include <xxhash.h>

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

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

// A manifest's fields, read strictly: each once, of its JSON type (no number read as another).
// NOTE: read with RapidJSON, written with nlohmann: RapidJSON parses a 4 KB manifest in ~5 us
// where nlohmann takes ~24, and that parse was ~40% of a warm start (14 manifests for Kimi-K3).
using Value = rapidjson::Value;

const Value* find(const Value& object, const char* name) {
  const Value* found = nullptr;
  for (auto it = object.MemberBegin(); it != object.MemberEnd(); ++it) {
    if (std::string_view(it->name.GetString(), it->name.GetStringLength()) != name) continue;
    if (found) malformed(fmt::format("\"{}\" twice in one object", name));
    found = &it->value;
  }
  return found;
}

const Value& field(const Value& object, const char* name) {
  const auto* v = find(object, name);
  if (!v) malformed(fmt::format("no \"{}\" field", name));
  return *v;
}

const Value& object_of(const Value& object, const char* name) {
  const auto& v = field(object, name);
  if (!v.IsObject()) malformed(fmt::format("\"{}\" is not an object", name));
  return v;
}

std::string string_of(const Value& object, const char* name) {
  const auto& v = field(object, name);
  if (!v.IsString()) malformed(fmt::format("\"{}\" is not a string", name));
  return {v.GetString(), v.GetStringLength()};
}

int int_of(const Value& object, const char* name) {
  const auto& v = field(object, name);
  if (!v.IsInt()) malformed(fmt::format("\"{}\" is not an integer", name));
  return v.GetInt();
}

std::uint64_t uint64_of(const Value& object, const char* name) {
  const auto& v = field(object, name);
  if (!v.IsUint64()) malformed(fmt::format("\"{}\" is not an unsigned integer", name));
  return v.GetUint64();
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
  const auto zeroed = zeroed_checksum(text);
  if (!zeroed) malformed(fmt::format("not exactly one {} field", kSelfChecksum));
  const auto sum = text.substr(zeroed->second, kChecksumDigits);
  if (checksum(zeroed->first) != sum) {
    throw Error({.kind = ErrorKind::cache, .message = "manifest checksum mismatch", .expected = "the manifest as it was written"});
  }
  // NOTE: the iterative parser: however deep a crafted manifest nests (an imported bundle's), it
  // never recurses, nor does the document's release (its pool allocator frees in one go).
  rapidjson::Document d;
  d.Parse<rapidjson::kParseIterativeFlag | rapidjson::kParseValidateEncodingFlag | rapidjson::kParseFullPrecisionFlag>(
      text.data(), text.size());
  if (d.HasParseError()) {
    std::string_view why = rapidjson::GetParseError_En(d.GetParseError());  // "Invalid value."
    if (why.ends_with('.')) why.remove_suffix(1);
    malformed(fmt::format("{} (at byte {})", why, d.GetErrorOffset()));
  }
  if (!d.IsObject()) malformed("not a JSON object");
  if (string_of(d, kSelfChecksum) != sum) malformed(fmt::format("a {} field nested below the top", kSelfChecksum));
  Manifest m;
  auto key = Key::from_hex(string_of(d, "key"));
  if (!key) malformed("a key that is not 32 hex digits");
  m.key = *key;
  m.inputs.schema_version = int_of(d, "schema");
  m.inputs.contract_text = string_of(d, "contract");
  m.inputs.template_hash = string_of(d, "template_hash");
  m.inputs.arch = string_of(d, "arch");
  m.inputs.nvrtc_version = string_of(d, "nvrtc");
  const auto& options = field(d, "options");
  if (!options.IsArray()) malformed("\"options\" is not an array");
  for (const auto& o : options.GetArray()) {
    if (!o.IsString()) malformed("an option that is not a string");
    m.inputs.options.emplace_back(o.GetString(), o.GetStringLength());
  }
  const auto& cubin = object_of(d, "cubin");
  m.cubin_bytes = uint64_of(cubin, "bytes");
  m.cubin_checksum = string_of(cubin, "xxh3_128");
  const auto& kernels = field(d, "kernels");
  if (!kernels.IsArray()) malformed("\"kernels\" is not an array");
  for (const auto& k : kernels.GetArray()) {
    if (!k.IsObject()) malformed("a kernel that is not an object");
    const auto* serialized = find(k, "wgmma_serialized");  // absent before it was recorded
    if (serialized && !serialized->IsBool()) malformed("\"wgmma_serialized\" is not true or false");
    m.kernels.push_back({string_of(k, "name_expression"), string_of(k, "lowered_name"),
                         KernelResources{int_of(k, "registers"), int_of(k, "shared_bytes"), int_of(k, "stack_bytes"),
                                         int_of(k, "spill_store_bytes"), int_of(k, "spill_load_bytes"), int_of(k, "barriers"),
                                         serialized && serialized->GetBool()}});
  }
  const auto& seconds = field(d, "compile_seconds");
  if (!seconds.IsNumber()) malformed("\"compile_seconds\" is not a number");
  m.compile_seconds = seconds.GetDouble();
  m.created = string_of(d, "created");
  return m;
}

}  // namespace moejit::detail
