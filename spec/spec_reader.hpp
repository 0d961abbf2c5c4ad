#pragma once
// Typed, validated reads from one JSON object of a spec. Every failure names the file, the JSON
// pointer of the field, the value found and what is allowed; finish() rejects unknown fields.

#include <moejit/dtype.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace moejit::detail {

/// The smallest and largest normal fp32 numbers: the range f32() fields are held to.
inline constexpr double kF32Min = 1.1754943508222875e-38;
inline constexpr double kF32Max = 3.4028234663852886e+38;

class SpecReader {
 public:
  SpecReader(const nlohmann::json& object, std::string file, std::string pointer);

  const std::string& file() const noexcept { return file_; }
  const std::string& pointer() const noexcept { return pointer_; }
  /// The pointer of a field of this object: "/ops/1" + "beta" -> "/ops/1/beta".
  std::string pointer_to(std::string_view key) const;

  bool has(std::string_view key) const;
  std::string string(std::string_view key, std::optional<std::string> fallback = std::nullopt);
  std::string choice(std::string_view key, std::initializer_list<std::string_view> allowed,
                     std::optional<std::string_view> fallback = std::nullopt);
  /// An integer in [lo, hi]; an integral float (8.0) counts, as JSON Schema counts it.
  std::int64_t integer(std::string_view key, std::int64_t lo, std::int64_t hi,
                       std::optional<std::int64_t> fallback = std::nullopt);
  /// A finite number (NaN and infinities are rejected).
  double number(std::string_view key, std::optional<double> fallback = std::nullopt);
  /// A number in [lo, hi] that the kernels use as an fp32 value: callers pass bounds that fp32
  /// holds as normal numbers (kF32Min, kF32Max), so nothing rounds to 0 or infinity on the way.
  float f32(std::string_view key, double lo, double hi, std::optional<double> fallback = std::nullopt);
  bool boolean(std::string_view key, std::optional<bool> fallback = std::nullopt);
  DType dtype(std::string_view key, std::initializer_list<DType> allowed,
              std::optional<DType> fallback = std::nullopt);
  /// Rejects the field when present: `why` says when it applies ("applies only to kind situ").
  void forbid(std::string_view key, std::string_view why);
  /// Marks a field as known without reading it (read by someone else).
  void allow(std::string_view key);

  [[noreturn]] void fail(std::string_view key, std::string message, std::string expected) const;
  /// Throws for the first field that no getter asked about.
  void finish() const;

  const nlohmann::json& value(std::string_view key) const;

 private:
  /// The field's value; a missing one fails, naming what is allowed (`expected`).
  const nlohmann::json& required(std::string_view key, std::string_view expected) const;

  const nlohmann::json& object_;
  std::string file_;
  std::string pointer_;
  std::vector<std::string> known_;
};

/// A short rendering of a JSON value for error messages.
std::string describe_json(const nlohmann::json& value);
/// Escapes a key for a JSON pointer (RFC 6901).
std::string pointer_escape(std::string_view key);

}  // namespace moejit::detail
