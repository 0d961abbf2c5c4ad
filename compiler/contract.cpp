#include <moejit/contract.hpp>
#include <moejit/error.hpp>

#include "embedded_templates.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include <sstream>

namespace moejit {

namespace {
constexpr std::string_view kHeader = "moejit-contract 1";
}

Contract::Contract(std::string family, std::string arch, std::string template_name)
    : family_(std::move(family)), arch_(std::move(arch)), template_name_(std::move(template_name)) {}

Contract& Contract::set(std::string name, std::string value) {
  fields_.push_back({std::move(name), std::move(value)});
  return *this;
}

std::string_view Contract::get(std::string_view name) const noexcept {
  for (const auto& f : fields_) {
    if (f.name == name) return f.value;
  }
  return {};
}

std::string Contract::text() const {
  std::string out = fmt::format("{}\nfamily {}\ntemplate {}\narch {}\n", kHeader, family_,
                                template_name_, arch_);
  for (const auto& f : fields_) out += fmt::format("{} {}\n", f.name, f.value);
  return out;
}

std::size_t Contract::kernel_index(std::string_view role) const {
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    if (kernels[i].role == role) return i;
  }
  std::vector<std::string_view> roles;
  for (const auto& k : kernels) roles.push_back(k.role);
  throw Error({.kind = ErrorKind::internal, .message = fmt::format("the {} contract has no kernel of this role", family_),
               .found = std::string(role), .expected = fmt::format("one of {}", fmt::join(roles, ", "))});
}

bool Contract::has_kernel(std::string_view role) const noexcept {
  return std::ranges::any_of(kernels, [&](const Kernel& k) { return k.role == role; });
}

Contract parse_contract_text(std::string_view text) {
  std::istringstream in{std::string(text)};
  std::string line;
  auto bad = [&](std::string what) {
    return Error({.kind = ErrorKind::cache, .message = "malformed contract text", .found = line,
                  .expected = std::move(what)});
  };
  if (!std::getline(in, line) || line != kHeader) throw bad(std::string(kHeader));
  std::string family, tmpl, arch;
  std::vector<Contract::Field> fields;
  while (std::getline(in, line)) {
    auto space = line.find(' ');
    if (space == std::string::npos) throw bad("'name value'");
    auto name = line.substr(0, space);
    auto value = line.substr(space + 1);
    if (name == "family") family = value;
    else if (name == "template") tmpl = value;
    else if (name == "arch") arch = value;
    else fields.push_back({name, value});
  }
  Contract c(family, arch, tmpl);
  for (auto& f : fields) c.set(f.name, f.value);
  return c;
}

namespace detail {

const EmbeddedTemplate& find_template(std::string_view name) {
  for (const auto& t : embedded_templates()) {
    if (t.name == name) return t;
  }
  throw Error({.kind = ErrorKind::internal, .message = "no embedded template", .found = std::string(name)});
}

}  // namespace detail
}  // namespace moejit
