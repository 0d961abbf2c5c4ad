#pragma once
// The op families, one table per layer in one shape: a family's name and that layer's entry
// point (spec: parse; compiler: contracts; runtime: load; reference: harness). Adding an op adds
// one line to each table; tests/unit/test_registry.cpp checks that they name the same families.

#include <moejit/spec.hpp>

#include <memory>
#include <span>
#include <string_view>

namespace moejit::detail {

class SpecReader;

template <class Entry>
struct Family {
  std::string_view name;
  Entry entry;
};

/// The row of `name` in a layer's table, or null.
template <class Entry>
const Family<Entry>* find_family(std::span<const Family<Entry>> table, std::string_view name) noexcept {
  for (const auto& f : table) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

using ParseOp = std::shared_ptr<OpSpec> (*)(SpecReader& reader);

/// The families the spec parser knows.
std::span<const Family<ParseOp>> spec_families() noexcept;

}  // namespace moejit::detail
