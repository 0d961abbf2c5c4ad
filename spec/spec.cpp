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
#include <unordered_set>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

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

// The most a spec file may hold: far beyond any model's (a few KB), small enough to parse at once.
constexpr std::uint64_t kMaxSpecBytes = std::uint64_t{64} << 20;
// The deepest nesting a spec may have (a spec nests 3 levels): deeper is refused while parsing.
constexpr std::size_t kMaxSpecDepth = 64;

[[noreturn]] void spec_error(std::string_view file, std::string message, std::string found = {},
                             std::string expected = {}, std::string pointer = {}) {
  throw Error({.kind = ErrorKind::spec, .message = std::move(message), .file = std::string(file),
               .pointer = std::move(pointer), .found = std::move(found), .expected = std::move(expected)});
}

std::string_view type_name(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// A spec file's text. NOTE: stat before open, so that a device is never opened and a FIFO never
// waited on; the open is O_NONBLOCK and checked again with fstat; the read stops past the limit.
std::string read_spec_file(const std::filesystem::path& file) {
  const auto name = file.string();
  const auto cannot = [&] {
    spec_error(name, fmt::format("cannot read spec file: {}", std::strerror(errno)), "", "a readable JSON file");
  };
  const auto refuse_type = [&](mode_t mode) {
    spec_error(name, "refusing to read a spec file that is not a regular file", std::string(type_name(mode)),
               "a regular JSON file");
  };
  const auto refuse_size = [&](std::string found) {
    spec_error(name, "spec file too large", std::move(found),
               fmt::format("at most {} bytes (moejit's limit for a spec)", kMaxSpecBytes));
  };
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) cannot();
  if (S_ISDIR(st.st_mode)) {
    spec_error(name, "cannot read spec file: it is a directory", "",
               "a JSON spec file (validate and warmup take a directory of specs)");
  }
  if (!S_ISREG(st.st_mode)) refuse_type(st.st_mode);
  if (static_cast<std::uint64_t>(st.st_size) > kMaxSpecBytes) refuse_size(fmt::format("{} bytes", st.st_size));
  const int fd = ::open(file.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) cannot();
  const struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  if (::fstat(fd, &st) != 0) cannot();
  if (!S_ISREG(st.st_mode)) refuse_type(st.st_mode);
  std::string text;
  char buf[1 << 16];
  while (text.size() <= kMaxSpecBytes) {
    const auto n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) cannot();
    if (n == 0) return text;
    text.append(buf, static_cast<std::size_t>(n));
  }
  refuse_size(fmt::format("more than {} bytes", kMaxSpecBytes));
  return text;
}

// "line 3, column 14" of a byte offset (columns count bytes from 1, as nlohmann's messages do).
std::string line_column(std::string_view text, std::size_t offset) {
  offset = std::min(offset, text.size());
  const auto before = text.substr(0, offset);
  const auto line_start = before.rfind('\n');
  const auto line = 1 + static_cast<std::size_t>(std::count(before.begin(), before.end(), '\n'));
  const auto column = offset - (line_start == std::string_view::npos ? 0 : line_start + 1) + 1;
  return fmt::format("line {}, column {}", line, column);
}

// Builds a spec's JSON as json::parse does, in time linear in its size (nlohmann's callback
// parser rescans an array at every object's end: 200,000 `{}` took 15 s), and refuses what JSON
// allows but a spec must not have: a key repeated in one object (nlohmann would keep the last
// silently), nesting deeper than kMaxSpecDepth.
class SpecJson {
 public:
  explicit SpecJson(json& root) : root_(root) {}

  bool null() { return add(nullptr); }
  bool boolean(bool v) { return add(v); }
  bool number_integer(json::number_integer_t v) { return add(v); }
  bool number_unsigned(json::number_unsigned_t v) { return add(v); }
  bool number_float(json::number_float_t v, const std::string&) { return add(v); }
  bool string(std::string& v) { return add(std::move(v)); }
  bool binary(json::binary_t& v) { return add(std::move(v)); }
  bool start_object(std::size_t) { return open(json::object()); }
  bool start_array(std::size_t) { return open(json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(std::string& k) {
    auto& top = stack_.back();
    if (top.node->contains(k)) {
      refusal_ = {"malformed JSON: a key appears twice in one object", pointer() + "/" + detail::pointer_escape(k), k,
                  "each key once"};
      return false;
    }
    top.key = std::move(k);
    return true;
  }

  bool parse_error(std::size_t position, const std::string& token, const json::exception& e) {
    error_ = {position, token, e.what(), e.id};
    return false;
  }

  /// Throws the spec error that stopped the parse.
  [[noreturn]] void fail(std::string_view text, std::string_view file) const {
    if (!refusal_.message.empty()) spec_error(file, refusal_.message, refusal_.found, refusal_.expected, refusal_.pointer);
    if (error_.id == 406) {  // nlohmann's "number overflow": it says neither where nor what is allowed
      const auto where = line_column(text, error_.position - error_.token.size());
      spec_error(file, fmt::format("malformed JSON: number out of range at {}", where), error_.token,
                 "a number within the range of a double (about 1.8e308)", pointer_of_child());
    }
    // nlohmann's what() is "[json.exception.parse_error.101] parse error at line 1, column 9:
    // syntax error ...": the part after the tag says where and what.
    std::string_view what = error_.what;
    if (what.starts_with("[json.exception.")) what.remove_prefix(std::min(what.size(), what.find(']') + 2));
    // nlohmann's text already says what it expected; NaN and Infinity read as invalid literals.
    const bool literal = what.find("invalid literal") != std::string_view::npos &&
                         (text.find("NaN") != std::string_view::npos || text.find("Infinity") != std::string_view::npos);
    spec_error(file, fmt::format("malformed JSON: {}{}", what, literal ? " (NaN and Infinity are not JSON numbers)" : ""));
  }

 private:
  struct Frame {
    json* node;
    std::string key;  // the key of the value being read, in an object
  };
  struct Refusal {
    std::string message, pointer, found, expected;
  };
  struct ParseError {
    std::size_t position = 0;
    std::string token, what;
    int id = 0;
  };

  bool add(json&& v) {
    place(std::move(v));
    return true;
  }

  // NOTE: the pointers on the stack stay valid: only the top container grows, and none of its
  // elements is on the stack while it does.
  json* place(json&& v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    auto& top = stack_.back();
    if (top.node->is_object()) return &((*top.node)[top.key] = std::move(v));
    top.node->push_back(std::move(v));
    return &top.node->back();
  }

  bool open(json&& container) {
    if (stack_.size() >= kMaxSpecDepth) {
      refusal_ = {fmt::format("malformed JSON: nested deeper than {} levels", kMaxSpecDepth), pointer_of_child(), "",
                  "a spec (it nests 3 levels)"};
      return false;
    }
    stack_.push_back({place(std::move(container)), {}});
    return true;
  }

  bool close() {
    stack_.pop_back();
    return true;
  }

  // The pointer of the innermost open container.
  std::string pointer() const {
    std::string p;
    for (std::size_t i = 0; i + 1 < stack_.size(); ++i) {
      p += '/';
      p += child(stack_[i], /*placed=*/true);
    }
    return p;
  }

  // The pointer of the value being read (not yet placed) in the innermost container.
  std::string pointer_of_child() const {
    if (stack_.empty()) return {};
    std::string p = pointer();
    p += '/';
    p += child(stack_.back(), /*placed=*/false);
    return p;
  }

  static std::string child(const Frame& f, bool placed) {
    if (f.node->is_object()) return detail::pointer_escape(f.key);
    return std::to_string(f.node->size() - (placed ? 1 : 0));
  }

  json& root_;
  std::vector<Frame> stack_;
  Refusal refusal_;
  ParseError error_;
};

}  // namespace

std::span<const std::string_view> supported_archs() noexcept { return kSupportedArchs; }

bool is_supported_arch(std::string_view arch) noexcept {
  return std::find(std::begin(kSupportedArchs), std::end(kSupportedArchs), arch) != std::end(kSupportedArchs);
}

std::vector<std::string> default_archs() { return {"sm_90a", "sm_100a"}; }

Spec parse_spec(std::string_view text, std::string_view file) {
  if (const auto nul = text.find('\0'); nul != std::string_view::npos) {
    throw Error({.kind = ErrorKind::spec, .message = "not a text file", .file = std::string(file),
                 .found = fmt::format("a NUL byte at offset {}", nul), .expected = "a JSON spec (UTF-8 text)"});
  }
  json j;
  SpecJson sax(j);
  if (!json::sax_parse(text, &sax)) sax.fail(text, file);
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
  std::unordered_set<std::string> names;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    SpecReader r(ops[i], spec.file, fmt::format("/ops/{}", i));
    auto op = parse_op(r, i, /*single=*/false);
    if (!names.insert(op->name).second) {
      throw Error({.kind = ErrorKind::spec, .message = "duplicate op name", .file = spec.file,
                   .pointer = fmt::format("/ops/{}/name", i), .found = detail::describe_json(op->name),
                   .expected = "a name no other op of the spec has"});
    }
    spec.ops.push_back(std::move(op));
  }
  top.finish();
  return spec;
}

Spec load_spec(const std::filesystem::path& file) { return parse_spec(read_spec_file(file), file.string()); }

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
