// moejit validate SPEC... [--canonical]
#include "cli.hpp"

#include <fmt/format.h>

namespace moejit::tools {

Action add_validate(CLI::App& app) {
  struct Opts {
    std::vector<std::string> specs;
    bool canonical = false;
  };
  auto o = std::make_shared<Opts>();
  auto* sub = app.add_subcommand("validate", "Check spec files (or directories of them) and print a summary");
  sub->add_option("specs", o->specs, "spec files or directories")->required();
  sub->add_flag("--canonical", o->canonical, "print each spec in canonical form (defaults filled in)");
  return [o] {
    for (const auto& spec : load_specs(o->specs)) {
      std::vector<std::string> ops;
      for (const auto& op : spec.ops) ops.push_back(fmt::format("{} ({})", op->name, op->family()));
      fmt::print("ok {}: {}{} op{}: {}\n", spec.file, spec.model.empty() ? "" : spec.model + ", ", spec.ops.size(),
                 spec.ops.size() == 1 ? "" : "s", fmt::join(ops, ", "));
      if (o->canonical) fmt::print("{}\n", spec.canonical_json());
    }
    return kOk;
  };
}

}  // namespace moejit::tools
