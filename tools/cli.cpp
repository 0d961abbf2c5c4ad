#include "cli.hpp"

#include <moejit/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <unistd.h>

namespace moejit::tools {

std::vector<Spec> load_specs(const std::vector<std::string>& args) {
  std::vector<Spec> specs;
  for (const auto& file : spec_files(args)) specs.push_back(load_spec(file));
  return specs;
}

std::vector<std::shared_ptr<const OpSpec>> select_ops(const Spec& spec, const std::string& ops) {
  if (ops.empty()) return spec.ops;
  std::vector<std::shared_ptr<const OpSpec>> out;
  std::size_t start = 0;
  while (start <= ops.size()) {
    const auto comma = std::min(ops.find(',', start), ops.size());
    out.push_back(spec.op(std::string_view(ops).substr(start, comma - start)));
    start = comma + 1;
  }
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

std::uint64_t parse_size(const std::string& text) {
  std::size_t end = 0;
  double value = 0;
  try {
    value = std::stod(text, &end);
  } catch (...) {
    end = 0;
  }
  const std::string unit = text.substr(end);
  double scale = 0;
  if (unit.empty() || unit == "B") scale = 1;
  else if (unit == "K" || unit == "KB") scale = 1e3;
  else if (unit == "M" || unit == "MB") scale = 1e6;
  else if (unit == "G" || unit == "GB") scale = 1e9;
  else if (unit == "KiB") scale = 1024.0;
  else if (unit == "MiB") scale = 1024.0 * 1024;
  else if (unit == "GiB") scale = 1024.0 * 1024 * 1024;
  if (end == 0 || scale == 0 || value < 0) {
    throw Error({.kind = ErrorKind::usage, .message = "invalid size", .found = text,
                 .expected = "a size like 500M, 2G, 1.5GiB or a number of bytes"});
  }
  return static_cast<std::uint64_t>(value * scale);
}

bool stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

}  // namespace moejit::tools
