#pragma once
// The `moejit` command line: each subcommand lives in its own cmd_*.cpp and registers itself
// through one add_* function returning the action to run when it was chosen.

#include <moejit/spec.hpp>

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace moejit::tools {

/// Exit codes: 0 ok, 1 a check failed, 2 bad input, 3 could not run (no GPU, driver, toolchain).
inline constexpr int kOk = 0;
inline constexpr int kCheckFailed = 1;
inline constexpr int kBadInput = 2;
inline constexpr int kFailure = 3;

using Action = std::function<int()>;

Action add_validate(CLI::App& app);
Action add_compile(CLI::App& app);
Action add_warmup(CLI::App& app);
Action add_cache(CLI::App& app);
Action add_check(CLI::App& app);
Action add_bench(CLI::App& app);
Action add_run(CLI::App& app);

/// Loads every spec named by files or directories (specs/).
std::vector<Spec> load_specs(const std::vector<std::string>& args);
/// The ops an --op selection names: names or indices, comma-separated; all when empty.
std::vector<std::shared_ptr<const OpSpec>> select_ops(const Spec& spec, const std::string& ops);
/// "12.3 MB", "512 B"
std::string human_bytes(double bytes);
/// Parses "500M", "2G", "1048576" into bytes; throws moejit::Error (usage).
std::uint64_t parse_size(const std::string& text);
/// True when stderr is a terminal (progress lines are drawn only then).
bool stderr_is_terminal();

}  // namespace moejit::tools
