// libFuzzer target: spec text -> parse_spec -> every op's contracts for both architectures, each
// contract's text parsed back to an equal contract. Any input must end in a spec or one
// moejit::Error; anything else (another exception, a sanitizer report, a hang) is a bug.
#include <moejit/contract.hpp>
#include <moejit/error.hpp>
#include <moejit/spec.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const moejit::Spec spec = moejit::parse_spec(text, "fuzz.json");
    for (const auto& op : spec.ops) {
      for (const char* arch : {"sm_90a", "sm_100a"}) {
        for (const auto& contract : moejit::contracts(*op, arch)) {
          if (!(moejit::parse_contract_text(contract.text()) == contract)) std::abort();
        }
      }
    }
  } catch (const moejit::Error&) {
  }
  return 0;
}
