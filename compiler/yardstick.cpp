#include "yardstick.hpp"

#include "codegen.hpp"

#include <fmt/format.h>

namespace moejit::detail {

Contract yardstick_contract(std::string_view arch) {
  Contract c("yardstick", std::string(arch), "yardstick.cuh");
  c.set("threads", std::to_string(kYardstickThreads)).set("unroll", std::to_string(kYardstickUnroll));
  StubBuilder stub("yardstick.cuh");
  stub.constant("int", "kThreads", std::to_string(kYardstickThreads))
      .constant("int", "kUnroll", std::to_string(kYardstickUnroll))
      .constant("unsigned", "kNeverFolded", fmt::format("{:#x}u", kYardstickNeverFolded));
  stub.emit(c, {{std::string(kYardstickCopy), "moejit::yardstick_copy_kernel", "moejit::YardstickArgs"},
                {std::string(kYardstickRead), "moejit::yardstick_read_kernel", "moejit::YardstickArgs"}});
  return c;
}

}  // namespace moejit::detail
