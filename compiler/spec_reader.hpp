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
  std::int64_t integer(std::string_view key, std::int64_t lo, std::int64_t hi,
                       std::optional<std::int64_t> fallback = std::nullopt);
  /// A finite number (NaN and infinities are rejected); `what` describes the allowed range.
  double number(std::string_view key, std::optional<double> fallback = std::nullopt);
  std::optional<double> optional_number(std::string_view key);
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
  const nlohmann::json& required(std::string_view key) const;

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
