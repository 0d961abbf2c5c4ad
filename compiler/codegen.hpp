#pragma once
// Helpers for the generated stubs and the canonical contract text.

#include <moejit/dtype.hpp>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace moejit::detail {

/// Shortest decimal that reads back as the same float: the contract's spelling of a float.
std::string canonical_float(float x);
/// The float as the double its shortest decimal spells (1.702f -> 1.702): for canonical JSON.
double canonical_number(float x);
/// An exact C++ float literal (hex float): the stub's spelling of a float.
std::string float_literal(float x);

/// Builds `struct Config { static constexpr ... ; using ... ; };` for a generated stub.
class StubBuilder {
 public:
  explicit StubBuilder(std::string template_name) : template_name_(std::move(template_name)) {}

  StubBuilder& constant(std::string_view type, std::string_view name, std::string_view value);
  StubBuilder& integer(std::string_view name, long long value);
  StubBuilder& flag(std::string_view name, bool value);
  StubBuilder& real(std::string_view name, float value);
  StubBuilder& type(std::string_view name, DType dtype);
  /// Renders the stub: include, the Config struct, and one explicit instantiation of each kernel
  /// (function templates taking Config, then any template arguments the kernel's name gives,
  /// and one argument struct `args_type`).
  std::string render(const std::vector<std::string>& kernels, std::string_view args_type) const;
  /// Renders with one argument type per kernel: {kernel, args_type} pairs.
  std::string render(const std::vector<std::pair<std::string, std::string>>& kernels) const;
  /// The NVRTC name expression of `kernel<Config>`; a kernel given as `name<X>` (further
  /// template arguments) is `name<Config, X>`.
  static std::string name_expression(std::string_view kernel);

 private:
  std::string template_name_;
  std::vector<std::string> lines_;
};

}  // namespace moejit::detail
