#include "cli.hpp"

#include <moejit/error.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <limits>
#include <optional>
#include <unistd.h>

namespace moejit::tools {

std::vector<Spec> load_specs(const std::vector<std::string>& args) {
  std::vector<Spec> specs;
  for (const auto& file : spec_files(args)) specs.push_back(load_spec(file));
  return specs;
}

namespace {

// "a,b,,c" -> {"a", "b", "", "c"}: empty items kept, so that callers can refuse them.
std::vector<std::string_view> comma_items(std::string_view text) {
  std::vector<std::string_view> items;
  for (std::size_t start = 0;;) {
    const auto comma = std::min(text.find(',', start), text.size());
    items.push_back(text.substr(start, comma - start));
    if (comma == text.size()) return items;
    start = comma + 1;
  }
}

}  // namespace

std::vector<std::shared_ptr<const OpSpec>> select_ops(const Spec& spec, const std::string& ops) {
  if (ops.empty()) return spec.ops;
  std::vector<std::shared_ptr<const OpSpec>> out;
  for (const auto item : comma_items(ops)) out.push_back(spec.op(item));
  return out;
}

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (bytes >= 1000 && u < 4) {
    bytes /= 1000;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.1f} {}", bytes, units[u]);
}

namespace {

struct SizeUnit {
  std::string_view name;
  std::uint64_t scale;
};
constexpr SizeUnit kSizeUnits[] = {
    {"", 1},          {"B", 1},           {"K", 1000},         {"KB", 1000},
    {"M", 1000000},   {"MB", 1000000},    {"G", 1000000000},   {"GB", 1000000000},
    {"KiB", 1u << 10}, {"MiB", 1u << 20}, {"GiB", 1u << 30},
};
// NOTE: 9 digits keep fraction * scale below 10^9 * 2^30 < 2^64.
constexpr std::size_t kMaxFractionDigits = 9;

// How a value shows in a message: an empty one says so, one with spaces at an end is quoted.
std::string shown(std::string_view text) {
  if (text.empty()) return "an empty value";
  if (std::isspace(static_cast<unsigned char>(text.front())) || std::isspace(static_cast<unsigned char>(text.back()))) {
    return fmt::format("'{}'", text);
  }
  return std::string(text);
}

// The message of an Error with these fields, for a CLI11 validator to return (CLI11 puts the
// option's name in front).
std::string usage_text(std::string message, std::string found, std::string expected) {
  return Error({.kind = ErrorKind::usage, .message = std::move(message), .found = std::move(found),
                .expected = std::move(expected)})
      .what();
}

std::size_t count_digits(std::string_view text, std::size_t from) {
  std::size_t n = 0;
  while (from + n < text.size() && std::isdigit(static_cast<unsigned char>(text[from + n]))) ++n;
  return n;
}

// The whole text as a base-10 T (from_chars: no spaces, '+', base prefix or exponent).
template <typename T>
std::optional<T> decimal(std::string_view text) {
  T value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// "-?[0-9]+": an integer, if perhaps too large for any type.
bool looks_decimal(std::string_view text) {
  const std::size_t sign = !text.empty() && text.front() == '-' ? 1 : 0;
  return text.size() > sign && count_digits(text, sign) == text.size() - sign;
}

// Empty when `text` is an integer in [lo, hi]; otherwise what is wrong, CLI11's way for a
// number out of range ("Value 0 not in range 1 to 1000").
template <typename T>
std::string integer_problem(std::string_view text, T lo, T hi, std::string_view expected_kind = "one") {
  if (const auto v = decimal<T>(text); v && *v >= lo && *v <= hi) return {};
  if (looks_decimal(text)) return fmt::format("Value {} not in range {} to {}", detail::printable(text), lo, hi);
  return fmt::format("Value '{}' is not a decimal integer; expected {} in range {} to {}", detail::printable(text),
                     expected_kind, lo, hi);
}

// Bytes of a size, or the fields of what is wrong with it.
std::optional<ErrorFields> read_size(std::string_view text, std::uint64_t& bytes) {
  const std::string form =
      "a size like 500M, 2G, 1.5GiB or 1048576: digits, an optional fraction of up to 9 digits and an optional "
      "unit B, K, KB, M, MB, G, GB (powers of 1000) or KiB, MiB, GiB (powers of 1024)";
  const std::size_t whole_digits = count_digits(text, 0);
  std::size_t pos = whole_digits;
  std::string_view fraction;
  const bool point = pos < text.size() && text[pos] == '.';
  if (point) {
    fraction = text.substr(pos + 1, count_digits(text, pos + 1));
    pos += 1 + fraction.size();
  }
  const auto unit = std::ranges::find(kSizeUnits, text.substr(pos), &SizeUnit::name);
  const ErrorFields invalid{.kind = ErrorKind::usage, .message = "invalid size", .found = shown(text), .expected = form};
  if (whole_digits == 0 || (point && fraction.empty()) || unit == std::end(kSizeUnits)) return invalid;
  if (fraction.size() > kMaxFractionDigits || (!fraction.empty() && unit->scale == 1)) return invalid;
  const auto whole = decimal<std::uint64_t>(text.substr(0, whole_digits));
  std::uint64_t fraction_bytes = 0;
  if (!fraction.empty()) {
    std::uint64_t denominator = 1;
    for (std::size_t i = 0; i < fraction.size(); ++i) denominator *= 10;
    fraction_bytes = *decimal<std::uint64_t>(fraction) * unit->scale / denominator;
  }
  constexpr auto kMax = std::numeric_limits<std::uint64_t>::max();
  if (!whole || *whole > kMax / unit->scale || *whole * unit->scale > kMax - fraction_bytes) {
    return ErrorFields{.kind = ErrorKind::usage, .message = "size too large", .found = shown(text),
                       .expected = fmt::format("at most {} bytes", kMax)};
  }
  bytes = *whole * unit->scale + fraction_bytes;
  return std::nullopt;
}

}  // namespace

std::uint64_t parse_size(const std::string& text) {
  std::uint64_t bytes = 0;
  if (auto problem = read_size(text, bytes)) throw Error(std::move(*problem));
  return bytes;
}

CLI::Validator integer_in(std::int64_t lo, std::int64_t hi) {
  return CLI::Validator([lo, hi](std::string& text) { return integer_problem(text, lo, hi); },
                        "INT");
}

CLI::Validator unsigned_integer() {
  return CLI::Validator(
      [](std::string& text) { return integer_problem<std::uint64_t>(text, 0, std::numeric_limits<std::uint64_t>::max()); },
      "UINT64");
}

CLI::Validator integer_list_in(std::int64_t lo, std::int64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        for (const auto item : comma_items(text)) {
          if (auto problem = integer_problem(item, lo, hi, "comma-separated integers"); !problem.empty()) {
            return item.size() == text.size() ? problem : fmt::format("{} (in '{}')", problem, detail::printable(text));
          }
        }
        return {};
      },
      "INT,...");
}

std::vector<std::int64_t> integer_list(const std::vector<std::string>& values) {
  std::vector<std::int64_t> out;
  for (const auto& value : values) {
    for (const auto text : comma_items(value)) {
      const auto item = decimal<std::int64_t>(text);
      if (!item) {
        throw Error({.kind = ErrorKind::internal, .message = "integer_list of a value integer_list_in did not check",
                     .found = value});
      }
      out.push_back(*item);
    }
  }
  return out;
}

void check_token_limit(const OpSpec& op, std::int64_t tokens, std::string_view from) {
  const auto max = op.max_tokens();
  if (max <= 0 || tokens <= max) return;
  throw Error({.kind = ErrorKind::usage, .message = fmt::format("op '{}' takes at most {} tokens (its max_tokens)", op.name, max),
               .pointer = std::string(from), .found = std::to_string(tokens), .expected = fmt::format("0 to {}", max)});
}

std::vector<std::int64_t> token_list(std::span<const std::shared_ptr<const OpSpec>> ops, const std::vector<std::string>& values) {
  auto tokens = integer_list(values);
  for (const auto& op : ops) {
    for (auto t : tokens) check_token_limit(*op, t, "--tokens");
  }
  return tokens;
}

CLI::Validator supported_arch() {
  return CLI::Validator(
      [](std::string& arch) -> std::string {
        if (is_supported_arch(arch)) return {};
        return usage_text("unsupported arch", shown(arch), fmt::format("one of {}", fmt::join(supported_archs(), ", ")));
      },
      "ARCH");
}

CLI::Validator size_value() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        std::uint64_t bytes = 0;
        const auto problem = read_size(text, bytes);
        return problem ? Error(*problem).what() : std::string();
      },
      "SIZE");
}

void refuse_empty_values(CLI::App& app) {
  for (auto* opt : app.get_options()) {
    if (opt->get_type_size_max() == 0) continue;  // a flag
    const std::string about = opt->get_description();
    opt->check(CLI::Validator(
        [about](std::string& value) -> std::string {
          return value.empty() ? usage_text("an empty value is not allowed", "", "a value: " + about) : std::string();
        },
        ""));
  }
  for (auto* sub : app.get_subcommands({})) refuse_empty_values(*sub);
}

int report_parse_error(CLI::App& app, const CLI::ParseError& error, const std::vector<std::string>& args) {
  if (error.get_exit_code() == 0) return app.exit(error);  // --help, --version: printed to stdout
  // The command the error is about: the last one chosen on the command line.
  CLI::App* at = &app;
  while (!at->get_subcommands().empty()) at = at->get_subcommands().front();
  std::string command = at->get_name();
  for (auto* p = at->get_parent(); p; p = p->get_parent()) command = p->get_name() + " " + command;
  std::string message = error.what();
  const auto choices = at->get_subcommands({});
  if (dynamic_cast<const CLI::RequiredError*>(&error) && !choices.empty()) {
    // NOTE: CLI11 says only "A subcommand is required", even when an unknown one was given.
    std::vector<std::string> names;
    for (const auto* c : choices) names.push_back(c->get_name());
    const auto given = at->remaining();
    message = given.empty() ? fmt::format("'{}' needs a command; expected one of {}", command, fmt::join(names, ", "))
                            : fmt::format("unknown command '{}' for '{}'; expected one of {}", given.front(),
                                          command, fmt::join(names, ", "));
  }
  // NOTE: CLI11 puts values in its messages whole ("--emit: <20,000 characters> not in {...}"):
  // each long argument (or the value after its '=') is cut as Error cuts a value.
  for (const auto& arg : args) {
    for (const auto& value : {std::string_view(arg), std::string_view(arg).substr(arg.find('=') + 1)}) {
      if (value.size() <= detail::kMaxValueChars) continue;
      for (auto pos = message.find(value); pos != std::string::npos; pos = message.find(value, pos + 1)) {
        message.replace(pos, value.size(), detail::printable(value));
      }
    }
  }
  std::fprintf(stderr, "moejit: error: %s (see '%s --help')\n", detail::printable(message, 2000).c_str(),
               detail::printable(command, 200).c_str());
  return kBadInput;
}

bool stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

}  // namespace moejit::tools
