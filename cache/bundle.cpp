// Cache bundles: `moejit cache export FILE` writes every valid entry into one file that
// `moejit cache import FILE` verifies and publishes on another machine or cache path.
//
//   MOEJIT-BUNDLE 1\n
//   entry <manifest bytes> <cubin bytes>\n <manifest> <cubin>      (repeated)
//   end <entries> <XXH3-128 of everything before this line>\n
#include "cache.hpp"

#include <moejit/error.hpp>

#include "fs.hpp"

#include <fmt/format.h>

#include <charconv>

namespace moejit::detail {

namespace {

constexpr std::string_view kMagic = "MOEJIT-BUNDLE 1\n";

[[noreturn]] void corrupt(const std::filesystem::path& file, std::string what) {
  throw Error({.kind = ErrorKind::input, .message = "corrupt or truncated cache bundle", .file = file.string(),
               .found = std::move(what), .expected = "a file written by `moejit cache export`"});
}

// Reads "<word> <n> <m>\n" at `pos`.
bool read_header(std::string_view data, std::size_t& pos, std::string_view word, std::uint64_t& a,
                 std::string& b) {
  const auto eol = data.find('\n', pos);
  if (eol == std::string_view::npos) return false;
  std::string_view line = data.substr(pos, eol - pos);
  if (!line.starts_with(word) || line.size() <= word.size() + 1) return false;
  line.remove_prefix(word.size() + 1);
  const auto space = line.find(' ');
  if (space == std::string_view::npos) return false;
  auto [end, ec] = std::from_chars(line.data(), line.data() + space, a);
  if (ec != std::errc() || end != line.data() + space) return false;
  b = std::string(line.substr(space + 1));
  pos = eol + 1;
  return true;
}

}  // namespace

std::size_t Cache::export_bundle(const std::filesystem::path& file) const {
  check_output_file(file);  // before the entries are read: a bad path fails fast
  std::string out(kMagic);
  std::size_t count = 0;
  for (const auto& info : list()) {
    const auto key = Key::from_hex(info.key_hex);
    const auto dir = key ? shard(info.shard, /*create=*/false) : std::nullopt;
    std::string problem;
    const auto entry = dir ? read_entry(*dir, info.key_hex, *key, problem) : nullptr;
    if (!entry) continue;  // exports only entries that verify
    const auto manifest = entry->manifest.to_json();
    out += fmt::format("entry {} {}\n", manifest.size(), entry->cubin.size());
    out += manifest;
    out += entry->cubin;
    ++count;
  }
  out += fmt::format("end {} {}\n", count, checksum(out));
  if (out.size() > kMaxBundleBytes) {
    throw Error({.kind = ErrorKind::io, .message = "the cache is too large for one bundle", .file = file.string(),
                 .found = fmt::format("{} bytes", out.size()), .expected = fmt::format("at most {} bytes", kMaxBundleBytes)});
  }
  write_output_file(file, out);
  return count;
}

Cache::ImportResult Cache::import_bundle(const std::filesystem::path& file) {
  if (root_.empty()) {
    throw Error({.kind = ErrorKind::usage, .message = "import needs a disk cache"});
  }
  const auto data = read_input_file({.path = file, .what = "cache bundle", .max_bytes = kMaxBundleBytes});
  if (!std::string_view(data).starts_with(kMagic)) corrupt(file, "no bundle header");
  const auto end_line = data.rfind("end ");
  if (end_line == std::string::npos || data.empty() || data.back() != '\n') corrupt(file, "no end line");
  {
    std::size_t pos = end_line;
    std::uint64_t count = 0;
    std::string sum;
    if (!read_header(data, pos, "end", count, sum) || pos != data.size()) corrupt(file, "bad end line");
    if (sum != checksum(std::string_view(data).substr(0, end_line))) corrupt(file, "checksum mismatch");
  }

  ImportResult result;
  std::size_t pos = kMagic.size();
  while (pos < end_line) {
    std::uint64_t manifest_bytes = 0;
    std::string rest;
    if (!read_header(data, pos, "entry", manifest_bytes, rest)) corrupt(file, "bad entry header");
    std::uint64_t cubin_bytes = 0;
    std::from_chars(rest.data(), rest.data() + rest.size(), cubin_bytes);
    if (pos + manifest_bytes + cubin_bytes > end_line) corrupt(file, "entry runs past the end");
    auto entry = std::make_shared<CacheEntry>();
    entry->manifest = Manifest::from_json(std::string_view(data).substr(pos, manifest_bytes));
    entry->cubin = data.substr(pos + manifest_bytes, cubin_bytes);
    pos += manifest_bytes + cubin_bytes;

    const auto& m = entry->manifest;
    if (m.inputs.schema_version != kCacheSchemaVersion || !(make_key(m.inputs) == m.key) ||
        checksum(entry->cubin) != m.cubin_checksum || entry->cubin.size() != m.cubin_bytes) {
      corrupt(file, fmt::format("entry {} does not verify", m.key.hex()));
    }
    FileLock lock(locks_, lock_name(m.key));
    if (load(m.key)) {
      ++result.present;
      continue;
    }
    publish(std::move(entry));
    ++result.imported;
  }
  return result;
}

}  // namespace moejit::detail
