#pragma once
// The `moejit` command line: each subcommand lives in its own cmd_*.cpp and registers itself
// through one add_* function returning the action to run when it was chosen.

#include <moejit/spec.hpp>

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <span>
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
/// Parses "500M", "2G", "1.5GiB", "1048576" into bytes: decimal digits, an optional fraction of
/// at most 9 digits (not of bytes), an optional unit B, K, KB, M, MB, G, GB (powers of 1000) or
/// KiB, MiB, GiB (powers of 1024); nothing else (no spaces, sign, exponent, inf or nan). Throws
/// moejit::Error (usage) on any other text and on a size of 2^64 bytes or more.
std::uint64_t parse_size(const std::string& text);
/// True when stderr is a terminal (progress lines are drawn only then).
bool stderr_is_terminal();

// ---- Option values ----------------------------------------------------------------------------
// CLI11 validators: a bad value fails the parse, so no command runs with one (nothing reaches the
// GPU or the cache), and the message says what was found and what is allowed.

/// Token counts the CLI takes: Op::launch refuses 2^31 or more (kernels index tokens in 32 bits).
inline constexpr std::int64_t kMaxTokens = (std::int64_t{1} << 31) - 1;

/// A decimal integer in [lo, hi]: digits, with a '-' where lo < 0; no spaces, '+', base prefix,
/// exponent or fraction.
CLI::Validator integer_in(std::int64_t lo, std::int64_t hi);
/// A decimal integer in [0, 2^64 - 1].
CLI::Validator unsigned_integer();
/// Decimal integers in [lo, hi], comma-separated ("1,16,1024"), none empty. Give the option a
/// std::vector<std::string> without a CLI11 delimiter (CLI11 drops empty items) and read it with
/// integer_list().
CLI::Validator integer_list_in(std::int64_t lo, std::int64_t hi);
/// The integers of values integer_list_in() accepted.
std::vector<std::int64_t> integer_list(const std::vector<std::string>& values);
/// Refuses (usage, naming `from`: "--tokens" or the tensor it came from) a token count above
/// the op's max_tokens(), as Op::launch would, but before anything reaches the GPU.
void check_token_limit(const OpSpec& op, std::int64_t tokens, std::string_view from);
/// The token counts of a checked --tokens option (integer_list), each within every op's limit.
std::vector<std::int64_t> token_list(std::span<const std::shared_ptr<const OpSpec>> ops, const std::vector<std::string>& values);
/// An arch moejit compiles for (supported_archs()).
CLI::Validator supported_arch();
/// A size parse_size() takes.
CLI::Validator size_value();
/// Makes every option of `app` and its subcommands that takes a value refuse an empty one:
/// `--op ''` is a mistake, never "all ops".
void refuse_empty_values(CLI::App& app);
/// Prints a CLI11 parse error as one line, "moejit: error: ... (see 'moejit CMD --help')", and
/// returns the exit code: kBadInput, or kOk for --help and --version (printed to stdout). `args`
/// (the command line) lets a long argument CLI11 quotes in full be cut like any value.
int report_parse_error(CLI::App& app, const CLI::ParseError& error, const std::vector<std::string>& args);

}  // namespace moejit::tools
