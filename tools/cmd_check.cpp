// moejit check SPEC [--op NAME] [--tokens T,...] [--rows N] [--seed N] [--device N]
// Every op on the GPU against its CPU reference, over the op's input variants and token counts.
#include <moejit/context.hpp>
#include <moejit/error.hpp>
#include <moejit/op.hpp>

#include "cli.hpp"
#include "op_runner.hpp"

#include <fmt/format.h>

#include <limits>

namespace moejit::tools {

Action add_check(CLI::App& app) {
  struct Opts {
    std::string spec, op;
    std::vector<std::string> tokens;
    std::int64_t rows = 0;
    std::uint64_t seed = 1;
    int device = 0;
  };
  auto o = std::make_shared<Opts>();
  auto* sub = app.add_subcommand("check", "Run each op of a spec on the GPU and compare with the CPU reference");
  sub->add_option("spec", o->spec, "spec file")->required();
  sub->add_option("--op", o->op, "only these ops (names or indices, comma-separated)");
  sub->add_option("--tokens", o->tokens,
                  fmt::format("token counts to check, comma-separated, 0 to {} (default: the op's sweep)", kMaxTokens))
      ->check(integer_list_in(0, kMaxTokens));
  sub->add_option("--rows", o->rows,
                  fmt::format("past this many tokens, compare only this many rows of a call (the first, the last and "
                              "rows drawn from the seed), the reference computing those alone; 2 to {} (default: every row; "
                              "ops whose token extent is not first, the masked layouts, compare every row)",
                              kMaxTokens))
      ->check(integer_in(2, kMaxTokens));
  sub->add_option("--seed", o->seed, "random seed, 0 to 2^64 - 1")->check(unsigned_integer());
  sub->add_option("--device", o->device, "GPU ordinal")->check(integer_in(0, std::numeric_limits<int>::max()));
  return [o] {
    const Spec spec = load_spec(o->spec);
    const auto ops = select_ops(spec, o->op);
    const auto chosen_tokens = token_list(ops, o->tokens);
    Context context(Options::from_environment(), o->device);
    std::size_t cases = 0, failed = 0;
    for (const auto& op_spec : ops) {
      if (op_spec->ranks() > 1) {
        fmt::print("SKIP {}: spans {} GPUs; test_gpu's [tp2] cases check it\n", op_spec->name, op_spec->ranks());
        continue;
      }
      const auto op = context.load(op_spec);
      const auto& harness = reference::harness_for(op_spec->family());
      const auto tokens = chosen_tokens.empty() ? harness.check_tokens(*op_spec) : chosen_tokens;
      for (int variant = 0; variant < harness.variants(); ++variant) {
        const auto results = check_cases(context, *op, variant, tokens, o->seed + cases, o->rows);
        for (std::size_t i = 0; i < results.size(); ++i) {
          ++cases;
          const auto& r = results[i];
          const auto sampled = r.rows < tokens[i] ? fmt::format(" ({} rows compared)", r.rows) : std::string();
          fmt::print("{} {} [{}] T={}{}\n", r.passed() ? "PASS" : "FAIL", op_spec->name, harness.variant_name(variant), tokens[i], sampled);
          if (r.passed()) continue;
          ++failed;
          for (const auto& f : r.failures) fmt::print("  {}\n", f);
          fmt::print("  contract:\n{}", contracts(*op_spec, context.device().arch).front().text());
        }
      }
    }
    fmt::print("check: {} cases on {} ({}): {} passed, {} failed\n", cases, context.device().name, context.device().arch,
               cases - failed, failed);
    return failed ? kCheckFailed : kOk;
  };
}

}  // namespace moejit::tools
