// Cache bundles: `moejit cache export FILE` writes every valid entry into one file that
// `moejit cache import FILE` verifies and publishes on another machine or cache path.
//
//   MOEJIT-BUNDLE 1\n
//   entry <manifest bytes> <cubin bytes>\n <manifest> <cubin>      (repeated)
//   end <entries> <XXH3-128 of everything before this line>\n
#include "cache.hpp"

#include <moejit/error.hpp>

#include <fmt/format.h>

#include <charconv>
#include <unordered_set>

namespace moejit::detail {

namespace {

constexpr std::string_view kMagic = "MOEJIT-BUNDLE 1\n";

[[noreturn]] void corrupt(const std::filesystem::path& file, std::string what, std::string pointer = {}) {
  throw Error({.kind = ErrorKind::input, .message = "corrupt or truncated cache bundle", .file = file.string(),
               .pointer = std::move(pointer), .found = std::move(what), .expected = "a file written by `moejit cache export`"});
}

std::optional<std::uint64_t> decimal(std::string_view text) {
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// Reads "<word> <n> <rest>\n" at `pos`: n a decimal number, rest the line's remainder.
bool read_header(std::string_view data, std::size_t& pos, std::string_view word, std::uint64_t& n, std::string_view& rest) {
  const auto eol = data.find('\n', pos);
  if (eol == std::string_view::npos) return false;
  std::string_view line = data.substr(pos, eol - pos);
  if (!line.starts_with(word) || line.size() <= word.size() + 1 || line[word.size()] != ' ') return false;
  line.remove_prefix(word.size() + 1);
  const auto space = line.find(' ');
  if (space == std::string_view::npos) return false;
  const auto value = decimal(line.substr(0, space));
  if (!value) return false;
  n = *value;
  rest = line.substr(space + 1);
  pos = eol + 1;
  return true;
}

// Every entry of a bundle, each checked as `cache verify` checks one; throws (input, naming the
// bundle and the entry) at the first that fails, so nothing is published from a bad bundle.
std::vector<std::shared_ptr<CacheEntry>> read_bundle(std::string_view data, const std::filesystem::path& file) {
  if (!data.starts_with(kMagic)) corrupt(file, "no bundle header");
  const auto end_line = data.rfind("end ");
  if (end_line == std::string_view::npos || data.back() != '\n') corrupt(file, "no end line");
  std::uint64_t count = 0;
  {
    std::size_t pos = end_line;
    std::string_view sum;
    if (!read_header(data, pos, "end", count, sum) || pos != data.size()) corrupt(file, "bad end line");
    if (sum != checksum(data.substr(0, end_line))) corrupt(file, "checksum mismatch");
  }
  std::vector<std::shared_ptr<CacheEntry>> entries;
  std::unordered_set<Key, KeyHash> keys;
  for (std::size_t pos = kMagic.size(); pos < end_line;) {
    const auto where = fmt::format("entry {}", entries.size());
    std::uint64_t manifest_bytes = 0;
    std::string_view rest;
    const auto cubin_bytes = read_header(data, pos, "entry", manifest_bytes, rest) ? decimal(rest) : std::nullopt;
    if (!cubin_bytes || pos > end_line) corrupt(file, "bad entry header", where);
    // NOTE: compared by subtraction: sizes near 2^64 must not wrap around past the end.
    if (manifest_bytes > end_line - pos || *cubin_bytes > end_line - pos - manifest_bytes) {
      corrupt(file, fmt::format("entry of {} + {} bytes runs past the end", manifest_bytes, *cubin_bytes), where);
    }
    auto entry = std::make_shared<CacheEntry>();
    try {
      entry->manifest = Manifest::from_json(data.substr(pos, manifest_bytes));
    } catch (const Error& e) {
      corrupt(file, e.what(), where);
    }
    entry->cubin = std::string(data.substr(pos + manifest_bytes, *cubin_bytes));
    pos += manifest_bytes + *cubin_bytes;
    const auto& key = entry->manifest.key;
    if (const auto problem = entry_problem(*entry, key); !problem.empty()) {
      corrupt(file, fmt::format("entry {} does not verify: {}", key.hex(), problem), where);
    }
    if (!keys.insert(key).second) corrupt(file, fmt::format("key {} twice", key.hex()), where);
    entries.push_back(std::move(entry));
  }
  if (entries.size() != count) corrupt(file, fmt::format("{} entries, but its end line says {}", entries.size(), count));
  return entries;
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
    out += entry->cubin.view();
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
  const auto entries = read_bundle(data, file);
  ImportResult result;
  std::vector<Key> published;
  try {
    for (const auto& entry : entries) {
      const auto& key = entry->manifest.key;
      FileLock lock(locks_, lock_name(key));
      if (load(key)) {
        ++result.present;
        continue;
      }
      if (publish(entry) != entry) {
        ++result.present;  // another process published it meanwhile
        continue;
      }
      published.push_back(key);
      ++result.imported;
    }
  } catch (const Error& e) {
    // All or nothing: what this import published goes again.
    for (const auto& key : published) {
      if (const auto dir = shard(key.hex().substr(0, 2), /*create=*/false)) remove_entry(*dir, key.hex());
    }
    auto f = e.fields();
    f.message = fmt::format("cannot import {}: {}", file.string(), f.message);
    throw Error(std::move(f));
  }
  return result;
}

}  // namespace moejit::detail
