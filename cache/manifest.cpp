#include "manifest.hpp"

#include <moejit/error.hpp>

#include <xxhash.h>

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>

namespace moejit::detail {

using nlohmann::json;

std::string checksum(std::string_view data) {
  const XXH128_hash_t h = XXH3_128bits(data.data(), data.size());
  return fmt::format("{:016x}{:016x}", h.high64, h.low64);
}

std::string utc_now() {
  return fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", fmt::gmtime(std::chrono::system_clock::to_time_t(std::chrono::system_clock::now())));
}

std::string Manifest::to_json() const {
  json kernels_json = json::array();
  for (const auto& k : kernels) {
    kernels_json.push_back({{"name_expression", k.name_expression},
                            {"lowered_name", k.lowered_name},
                            {"registers", k.resources.registers},
                            {"shared_bytes", k.resources.shared_bytes},
                            {"stack_bytes", k.resources.stack_bytes},
                            {"spill_store_bytes", k.resources.spill_store_bytes},
                            {"spill_load_bytes", k.resources.spill_load_bytes},
                            {"barriers", k.resources.barriers}});
  }
  json j{{"schema", inputs.schema_version},
         {"key", key.hex()},
         {"contract", inputs.contract_text},
         {"template_hash", inputs.template_hash},
         {"arch", inputs.arch},
         {"nvrtc", inputs.nvrtc_version},
         {"options", inputs.options},
         {"cubin", {{"file", "kernel.cubin"}, {"bytes", cubin_bytes}, {"xxh3_128", cubin_checksum}}},
         {"kernels", kernels_json},
         {"compile_seconds", compile_seconds},
         {"created", created}};
  return j.dump(2) + "\n";
}

Manifest Manifest::from_json(std::string_view text) {
  try {
    const json j = json::parse(text);
    Manifest m;
    auto key = Key::from_hex(j.at("key").get<std::string>());
    if (!key) throw std::runtime_error("bad key");
    m.key = *key;
    m.inputs.schema_version = j.at("schema").get<int>();
    m.inputs.contract_text = j.at("contract").get<std::string>();
    m.inputs.template_hash = j.at("template_hash").get<std::string>();
    m.inputs.arch = j.at("arch").get<std::string>();
    m.inputs.nvrtc_version = j.at("nvrtc").get<std::string>();
    m.inputs.options = j.at("options").get<std::vector<std::string>>();
    m.cubin_bytes = j.at("cubin").at("bytes").get<std::uint64_t>();
    m.cubin_checksum = j.at("cubin").at("xxh3_128").get<std::string>();
    for (const auto& k : j.at("kernels")) {
      m.kernels.push_back({k.at("name_expression").get<std::string>(), k.at("lowered_name").get<std::string>(),
                           KernelResources{k.at("registers").get<int>(), k.at("shared_bytes").get<int>(),
                                           k.at("stack_bytes").get<int>(), k.at("spill_store_bytes").get<int>(),
                                           k.at("spill_load_bytes").get<int>(), k.at("barriers").get<int>()}});
    }
    m.compile_seconds = j.value("compile_seconds", 0.0);
    m.created = j.value("created", "");
    return m;
  } catch (const std::exception& e) {
    throw Error({.kind = ErrorKind::cache, .message = "malformed manifest", .found = e.what()});
  }
}

}  // namespace moejit::detail
