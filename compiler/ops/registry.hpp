#pragma once
// The op families the spec parser knows. Adding an op adds one line to registry.cpp.

#include <moejit/spec.hpp>

#include <memory>
#include <span>
#include <string_view>

namespace moejit::detail {

class SpecReader;

using ParseOp = std::shared_ptr<OpSpec> (*)(SpecReader& reader);

struct OpFamily {
  std::string_view name;
  ParseOp parse;
};

std::span<const OpFamily> op_families() noexcept;

}  // namespace moejit::detail
