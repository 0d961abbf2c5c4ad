#include <moejit/error.hpp>
#include <moejit/spec.hpp>

#include "ops/registry.hpp"
#include "spec_reader.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>

namespace moejit {

namespace {

using detail::SpecReader;
using nlohmann::json;

constexpr std::string_view kSupportedArchs[] = {"sm_90", "sm_90a", "sm_100", "sm_100a",
                                                "sm_103", "sm_103a", "sm_120", "sm_120a"};

std::vector<std::string> read_archs(SpecReader& r) {
  r.allow("archs");
  if (!r.has("archs")) return default_archs();
  const auto& v = r.value("archs");
  const std::string allowed = fmt::format("a non-empty array of {}", fmt::join(kSupportedArchs, ", "));
  if (!v.is_array() || v.empty()) r.fail("archs", "'archs' must be a non-empty array", allowed);
  std::vector<std::string> archs;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const auto& a = v[i];
    if (!a.is_string() || !is_supported_arch(a.get<std::string>())) {
      throw Error({.kind = ErrorKind::spec, .message = "unsupported arch", .file = r.file(),
                   .pointer = fmt::format("{}/{}", r.pointer_to("archs"), i),
                   .found = detail::describe_json(a), .expected = fmt::format("one of {}", fmt::join(kSupportedArchs, ", "))});
    }
    if (std::find(archs.begin(), archs.end(), a.get<std::string>()) != archs.end()) {
      throw Error({.kind = ErrorKind::spec, .message = "arch listed twice", .file = r.file(),
                   .pointer = fmt::format("{}/{}", r.pointer_to("archs"), i), .found = detail::describe_json(a),
                   .expected = "each arch once"});
    }
    archs.push_back(a.get<std::string>());
  }
  return archs;
}

std::shared_ptr<OpSpec> parse_op(SpecReader& r, std::size_t index, bool single) {
  std::vector<std::string_view> names;
  for (const auto& f : detail::spec_families()) names.push_back(f.name);
  r.allow("op");
  if (!r.has("op")) r.fail("op", "missing required field 'op'", fmt::format("one of {}", fmt::join(names, ", ")));
  const auto& op = r.value("op");
  const auto* family = op.is_string() ? detail::find_family(detail::spec_families(), op.get<std::string>()) : nullptr;
  if (!family) r.fail("op", "unknown op", fmt::format("one of {}", fmt::join(names, ", ")));

  const std::string fallback = single ? std::string(family->name)
                                      : fmt::format("{}_{}", family->name, index);
  std::string name = r.string("name", fallback);
  if (name.empty() || name.find_first_of(" \t\n/=") != std::string::npos ||
      std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    r.fail("name", "invalid op name", "a non-empty name without spaces, '/' or '=' that is not a number");
  }
  auto spec = family->entry(r);
  spec->name = std::move(name);
  return spec;
}

}  // namespace

std::span<const std::string_view> supported_archs() noexcept { return kSupportedArchs; }

bool is_supported_arch(std::string_view arch) noexcept {
  return std::find(std::begin(kSupportedArchs), std::end(kSupportedArchs), arch) != std::end(kSupportedArchs);
}

std::vector<std::string> default_archs() { return {"sm_90a", "sm_100a"}; }

Spec parse_spec(std::string_view text, std::string_view file) {
  json j;
  // NOTE: JSON allows a repeated key and nlohmann keeps the last one silently; a spec with two
  // "beta"s is a mistake, so the parser callback rejects it.
  std::vector<std::vector<std::string>> open_objects;
  std::string duplicate;
  auto no_duplicates = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) open_objects.emplace_back();
    if (event == json::parse_event_t::object_end && !open_objects.empty()) open_objects.pop_back();
    if (event == json::parse_event_t::key && !open_objects.empty()) {
      auto& keys = open_objects.back();
      const auto key = parsed.get<std::string>();
      if (std::find(keys.begin(), keys.end(), key) != keys.end() && duplicate.empty()) duplicate = key;
      keys.push_back(key);
    }
    return true;
  };
  if (const auto nul = text.find('\0'); nul != std::string_view::npos) {
    throw Error({.kind = ErrorKind::spec, .message = "not a text file", .file = std::string(file),
                 .found = fmt::format("a NUL byte at offset {}", nul), .expected = "a JSON spec (UTF-8 text)"});
  }
  try {
    j = json::parse(text, no_duplicates);
  } catch (const json::exception& e) {
    // nlohmann's what() is "[json.exception.parse_error.101] parse error at line 1, column 9:
    // syntax error ...": the part after the tag says where and what.
    std::string_view what = e.what();
    if (what.starts_with("[json.exception.")) what.remove_prefix(std::min(what.size(), what.find(']') + 2));
    // nlohmann's text already says what it expected; NaN and Infinity read as invalid literals.
    const bool literal = what.find("invalid literal") != std::string_view::npos &&
                         (text.find("NaN") != std::string_view::npos || text.find("Infinity") != std::string_view::npos);
    throw Error({.kind = ErrorKind::spec,
                 .message = fmt::format("malformed JSON: {}{}", what, literal ? " (NaN and Infinity are not JSON numbers)" : ""),
                 .file = std::string(file)});
  }
  if (!duplicate.empty()) {
    throw Error({.kind = ErrorKind::spec, .message = "malformed JSON: a key appears twice in one object",
                 .file = std::string(file), .found = duplicate, .expected = "each key once"});
  }
  SpecReader top(j, std::string(file), "");
  Spec spec;
  spec.file = std::string(file);
  spec.archs = read_archs(top);
  if (top.has("op")) {
    spec.ops.push_back(parse_op(top, 0, /*single=*/true));
    return spec;
  }
  spec.model = top.string("model");
  top.string("description", "");
  top.allow("ops");
  if (!top.has("ops") || !top.value("ops").is_array() || top.value("ops").empty()) {
    top.fail("ops", "a spec needs a non-empty 'ops' array (or a single op with an 'op' field)",
             "a non-empty array of op objects");
  }
  const auto& ops = top.value("ops");
  for (std::size_t i = 0; i < ops.size(); ++i) {
    SpecReader r(ops[i], spec.file, fmt::format("/ops/{}", i));
    auto op = parse_op(r, i, /*single=*/false);
    for (const auto& other : spec.ops) {
      if (other->name == op->name) {
        throw Error({.kind = ErrorKind::spec, .message = "duplicate op name", .file = spec.file,
                     .pointer = fmt::format("/ops/{}/name", i), .found = detail::describe_json(op->name),
                     .expected = "a name no other op of the spec has"});
      }
    }
    spec.ops.push_back(std::move(op));
  }
  top.finish();
  return spec;
}

Spec load_spec(const std::filesystem::path& file) {
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec)) {
    throw Error({.kind = ErrorKind::spec, .message = "cannot read spec file: it is a directory", .file = file.string(),
                 .expected = "a JSON spec file (validate and warmup take a directory of specs)"});
  }
  errno = 0;
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    const int err = errno;
    throw Error({.kind = ErrorKind::spec,
                 .message = err ? fmt::format("cannot read spec file: {}", std::strerror(err)) : "cannot read spec file",
                 .file = file.string(), .expected = "a readable JSON file"});
  }
  std::ostringstream text;
  text << in.rdbuf();
  return parse_spec(text.str(), file.string());
}

std::vector<std::filesystem::path> spec_files(std::span<const std::string> args) {
  std::vector<std::filesystem::path> files;
  for (const auto& arg : args) {
    std::error_code ec;
    if (!std::filesystem::is_directory(arg, ec)) {
      files.emplace_back(arg);
      continue;
    }
    std::vector<std::filesystem::path> found;
    for (const auto& e : std::filesystem::directory_iterator(arg)) {
      if (e.path().extension() == ".json" && e.path().filename() != "schema.json") found.push_back(e.path());
    }
    if (found.empty()) {
      throw Error({.kind = ErrorKind::usage, .message = "no spec files in directory", .file = arg,
                   .expected = "a directory holding *.json specs"});
    }
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
  }
  return files;
}

const std::shared_ptr<const OpSpec>& Spec::op(std::string_view name_or_index) const {
  for (const auto& o : ops) {
    if (o->name == name_or_index) return o;
  }
  std::size_t index = 0;
  auto [end, ec] = std::from_chars(name_or_index.data(), name_or_index.data() + name_or_index.size(), index);
  if (ec == std::errc() && end == name_or_index.data() + name_or_index.size() && index < ops.size()) {
    return ops[index];
  }
  std::vector<std::string> names;
  for (const auto& o : ops) names.push_back(o->name);
  throw Error({.kind = ErrorKind::usage, .message = "no such op in spec", .file = file,
               .found = std::string(name_or_index),
               .expected = fmt::format("one of {} or an index below {}", fmt::join(names, ", "), ops.size())});
}

std::string Spec::canonical_json() const {
  json j;
  if (!model.empty()) j["model"] = model;
  j["archs"] = archs;
  j["ops"] = json::array();
  for (const auto& o : ops) {
    json op = json::parse(o->canonical_json());
    op["name"] = o->name;
    j["ops"].push_back(std::move(op));
  }
  return j.dump(2);
}

}  // namespace moejit
