#pragma once
// Shared scaffolding of the [gpu] tests: one Context per process, parallel warmup of the
// contracts a test needs, and a check that prints the whole case on failure.

#include <moejit/context.hpp>
#include <moejit/op.hpp>
#include <moejit/spec.hpp>

#include "cache/warmup.hpp"
#include "op_runner.hpp"
#include "tests/alloc_counter.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <string>
#include <thread>
#include <vector>


namespace moejit::test {

inline Context& gpu_context() {
  static Context context(Options::from_environment(), 0);  // NOTE: test scaffolding, one per process
  return context;
}

/// Compiles the contracts of all these single-op specs on every core before the test loads them.
inline std::vector<std::shared_ptr<const OpSpec>> warm(const std::vector<std::string>& op_jsons) {
  auto& ctx = gpu_context();
  std::vector<std::shared_ptr<const OpSpec>> ops;
  std::vector<detail::WarmupJob> jobs;
  for (const auto& json : op_jsons) {
    ops.push_back(parse_spec(json, "gpu-test.json").ops[0]);
    for (auto& c : contracts(*ops.back(), ctx.device().arch)) jobs.push_back({json, std::move(c)});
  }
  for (const auto& o : detail::warmup(ctx.cache(), jobs, std::max(2u, std::thread::hardware_concurrency()))) {
    INFO(o.error);
    REQUIRE(o.error.empty());
  }
  return ops;
}

/// Checks one case and prints the op, the case and the contract when it fails.
inline void check(const Op& op, tools::CheckCase c) {
  const auto r = tools::check_case(gpu_context(), op, c);
  if (r.passed()) return;
  std::string text;
  for (const auto& f : r.failures) text += "  " + f + "\n";
  FAIL_CHECK("op " << op.spec().canonical_json() << "\nvariant " << c.variant << " T=" << c.tokens << " seed " << c.seed
             << "\n" << text << "contract:\n" << contracts(op.spec(), gpu_context().device().arch).front().text());
}

}  // namespace moejit::test
