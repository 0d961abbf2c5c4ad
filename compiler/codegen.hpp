#pragma once
// Helpers for the generated stubs and the canonical contract text.

#include <moejit/contract.hpp>
#include <moejit/dtype.hpp>

#include "spec/canonical.hpp"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace moejit::detail {

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
  /// One kernel of the stub: the role launchers ask for, the kernel template (`name` or
  /// `name<X>` for further template arguments after Config) and its one argument struct.
  struct Kernel {
    std::string role;
    std::string name;
    std::string args;
    int dynamic_shared = 0;  ///< Contract::Kernel::dynamic_shared
  };
  /// Renders the stub into `contract.source` -- the include, the Config struct and one explicit
  /// instantiation of each kernel -- and lists the kernels, by role, in `contract.kernels`.
  void emit(Contract& contract, const std::vector<Kernel>& kernels) const;
  /// The NVRTC name expression of `kernel<Config>`; a kernel given as `name<X>` (further
  /// template arguments) is `name<Config, X>`.
  static std::string name_expression(std::string_view kernel);

 private:
  std::string template_name_;
  std::vector<std::string> lines_;
};

}  // namespace moejit::detail
