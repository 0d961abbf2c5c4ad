#include "spec_reader.hpp"

#include <moejit/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace moejit::detail {

std::string describe_json(const nlohmann::json& value) {
  if (value.is_object()) return "an object";
  if (value.is_array()) return fmt::format("an array of {}", value.size());
  std::string text = value.dump();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

std::string pointer_escape(std::string_view key) {
  std::string out;
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

SpecReader::SpecReader(const nlohmann::json& object, std::string file, std::string pointer)
    : object_(object), file_(std::move(file)), pointer_(std::move(pointer)) {
  if (!object_.is_object()) {
    throw Error({.kind = ErrorKind::spec, .message = "expected a JSON object", .file = file_,
                 .pointer = pointer_.empty() ? "/" : pointer_, .found = describe_json(object_)});
  }
}

std::string SpecReader::pointer_to(std::string_view key) const {
  return pointer_ + "/" + pointer_escape(key);
}

bool SpecReader::has(std::string_view key) const { return object_.contains(key); }

void SpecReader::allow(std::string_view key) {
  if (std::find(known_.begin(), known_.end(), key) == known_.end()) known_.emplace_back(key);
}

void SpecReader::fail(std::string_view key, std::string message, std::string expected) const {
  ErrorFields f{.kind = ErrorKind::spec, .message = std::move(message), .file = file_,
                .pointer = pointer_to(key), .expected = std::move(expected)};
  if (has(key)) f.found = describe_json(object_.at(key));
  throw Error(std::move(f));
}

const nlohmann::json& SpecReader::value(std::string_view key) const { return object_.at(key); }

const nlohmann::json& SpecReader::required(std::string_view key, std::string_view expected) const {
  if (!has(key)) fail(key, fmt::format("missing required field '{}'", key), std::string(expected));
  return object_.at(key);
}

std::string SpecReader::string(std::string_view key, std::optional<std::string> fallback) {
  allow(key);
  if (!has(key) && fallback) return *fallback;
  const auto& v = required(key, "a string");
  if (!v.is_string()) fail(key, fmt::format("'{}' must be a string", key), "a string");
  return v.get<std::string>();
}

std::string SpecReader::choice(std::string_view key, std::initializer_list<std::string_view> allowed,
                               std::optional<std::string_view> fallback) {
  allow(key);
  const std::string list = fmt::format("one of {}", fmt::join(allowed, ", "));
  if (!has(key) && fallback) return std::string(*fallback);
  const auto& v = required(key, list);
  if (!v.is_string()) fail(key, fmt::format("'{}' must be a string", key), list);
  auto s = v.get<std::string>();
  if (std::find(allowed.begin(), allowed.end(), s) == allowed.end()) {
    fail(key, fmt::format("unknown {} '{}'", key, s), list);
  }
  return s;
}

std::int64_t SpecReader::integer(std::string_view key, std::int64_t lo, std::int64_t hi,
                                 std::optional<std::int64_t> fallback) {
  allow(key);
  const std::string range = fmt::format("an integer in [{}, {}]", lo, hi);
  if (!has(key) && fallback) return *fallback;
  const auto& v = required(key, range);
  if (v.is_number_float()) {
    // JSON has one number type: 8.0 is the integer 8 (as JSON Schema says); 8.5 is not one.
    const double x = v.get<double>();
    if (!std::isfinite(x) || x != std::trunc(x)) fail(key, fmt::format("'{}' must be an integer", key), range);
    if (x < static_cast<double>(lo) || x > static_cast<double>(hi)) fail(key, fmt::format("'{}' is out of range", key), range);
    return static_cast<std::int64_t>(x);
  }
  if (!v.is_number_integer()) fail(key, fmt::format("'{}' must be an integer", key), range);
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(hi)) {
    fail(key, fmt::format("'{}' is out of range", key), range);
  }
  const auto n = v.get<std::int64_t>();
  if (n < lo || n > hi) fail(key, fmt::format("'{}' is out of range", key), range);
  return n;
}

double SpecReader::number(std::string_view key, std::optional<double> fallback) {
  allow(key);
  if (!has(key) && fallback) return *fallback;
  const auto& v = required(key, "a finite number");
  if (!v.is_number()) fail(key, fmt::format("'{}' must be a number", key), "a finite number");
  const auto x = v.get<double>();
  if (!std::isfinite(x)) fail(key, fmt::format("'{}' must be finite", key), "a finite number");
  return x;
}

float SpecReader::f32(std::string_view key, double lo, double hi, std::optional<double> fallback) {
  const std::string range = fmt::format("a finite number {}in [{:g}, {:g}]", lo > 0 ? "> 0, " : "", lo, hi);
  allow(key);
  if (!has(key) && fallback) return static_cast<float>(*fallback);
  const auto& v = required(key, range);
  if (!v.is_number()) fail(key, fmt::format("'{}' must be a number", key), range);
  const auto x = v.get<double>();
  if (lo > 0 && !(x > 0)) fail(key, fmt::format("'{}' must be > 0", key), range);
  // Beyond the bounds fp32 would turn the value into 0, a subnormal or infinity (1e-50, 1e300).
  if (!(x >= lo && x <= hi)) fail(key, fmt::format("'{}' is outside the range the kernels' fp32 math holds", key), range);
  return static_cast<float>(x);
}

bool SpecReader::boolean(std::string_view key, std::optional<bool> fallback) {
  allow(key);
  if (!has(key) && fallback) return *fallback;
  const auto& v = required(key, "true or false");
  if (!v.is_boolean()) fail(key, fmt::format("'{}' must be true or false", key), "true or false");
  return v.get<bool>();
}

DType SpecReader::dtype(std::string_view key, std::initializer_list<DType> allowed,
                        std::optional<DType> fallback) {
  allow(key);
  std::vector<std::string_view> names;
  for (DType t : allowed) names.push_back(spec_name(t));
  const std::string list = fmt::format("one of {}", fmt::join(names, ", "));
  if (!has(key) && fallback) return *fallback;
  const auto& v = required(key, list);
  if (!v.is_string()) fail(key, fmt::format("'{}' must be a dtype name", key), list);
  auto t = parse_dtype(v.get<std::string>());
  if (!t || std::find(allowed.begin(), allowed.end(), *t) == allowed.end()) {
    fail(key, fmt::format("unsupported dtype for '{}'", key), list);
  }
  return *t;
}

void SpecReader::forbid(std::string_view key, std::string_view why) {
  allow(key);
  if (has(key)) fail(key, fmt::format("'{}' {}", key, why), fmt::format("no '{}' field", key));
}

void SpecReader::finish() const {
  for (const auto& item : object_.items()) {
    if (std::find(known_.begin(), known_.end(), item.key()) != known_.end()) continue;
    std::vector<std::string> sorted = known_;
    std::sort(sorted.begin(), sorted.end());
    fail(item.key(), fmt::format("unknown field '{}'", item.key()),
         fmt::format("one of {}", fmt::join(sorted, ", ")));
  }
}

}  // namespace moejit::detail
