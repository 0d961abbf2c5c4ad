// The four layers' op tables (spec, compiler, runtime, reference) name the same families in the
// same order, so an op added to one and forgotten in another fails here, not at a user's launch.
#include "compiler/ops/registry.hpp"
#include "reference/harness.hpp"
#include "runtime/op_loader.hpp"
#include "spec/ops/registry.hpp"

#include <catch2/catch.hpp>

#include <string_view>
#include <vector>

using namespace moejit;

namespace {

template <class Entry>
std::vector<std::string_view> names(std::span<const detail::Family<Entry>> table) {
  std::vector<std::string_view> out;
  for (const auto& f : table) out.push_back(f.name);
  return out;
}

}  // namespace

TEST_CASE("every layer's op table names the same families", "[registry]") {
  const auto spec = names(detail::spec_families());
  REQUIRE_FALSE(spec.empty());
  CHECK(names(detail::compiler_families()) == spec);
  CHECK(names(detail::runtime_families()) == spec);
  CHECK(names(reference::reference_families()) == spec);
  for (const auto name : spec) {
    INFO(name);
    CHECK(detail::find_family(detail::spec_families(), name)->entry != nullptr);
    CHECK(detail::find_family(detail::compiler_families(), name)->entry != nullptr);
    CHECK(detail::find_family(detail::runtime_families(), name)->entry != nullptr);
    CHECK(&reference::harness_for(name) == &detail::find_family(reference::reference_families(), name)->entry());
  }
  CHECK(detail::find_family(detail::spec_families(), "no_such_op") == nullptr);
}
