#include "nvrtc.hpp"

#include <moejit/error.hpp>

#include "embedded_templates.hpp"

#include <nvrtc.h>

#include <fmt/format.h>

#include <chrono>
#include <regex>
#include <sstream>

namespace moejit::detail {

namespace {

// The options that enter the key: everything but include paths and the arch (hashed apart).
const std::vector<std::string> kKeyOptions = {"-std=c++17", "-default-device", "--ptxas-options=-v"};

class Program {
 public:
  Program(const std::string& source, const std::string& name) {
    std::vector<const char*> names, texts;
    for (const auto& t : embedded_templates()) {
      names.push_back(t.name.data());
      texts.push_back(t.text.data());
    }
    MOEJIT_NVRTC_CHECK(nvrtcCreateProgram(&prog_, source.c_str(), name.c_str(),
                                          static_cast<int>(names.size()), texts.data(), names.data()));
  }
  ~Program() { nvrtcDestroyProgram(&prog_); }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  nvrtcProgram get() const noexcept { return prog_; }

  std::string log() const {
    std::size_t size = 0;
    MOEJIT_NVRTC_CHECK(nvrtcGetProgramLogSize(prog_, &size));
    std::string text(size, '\0');
    MOEJIT_NVRTC_CHECK(nvrtcGetProgramLog(prog_, text.data()));
    while (!text.empty() && (text.back() == '\0' || text.back() == '\n')) text.pop_back();
    return text;
  }

 private:
  nvrtcProgram prog_ = nullptr;
};

std::string nvrtc_version() {
  int major = 0, minor = 0;
  MOEJIT_NVRTC_CHECK(nvrtcVersion(&major, &minor));
  return fmt::format("{}.{}", major, minor);
}

// "sm_90a" -> "compute_90a"
std::string virtual_arch(std::string_view arch) {
  return fmt::format("compute_{}", arch.substr(3));
}

int to_int(const std::string& s) { return std::stoi(s); }

}  // namespace

void check_nvrtc(int result, const char* call) {
  if (result == NVRTC_SUCCESS) return;
  throw Error({.kind = ErrorKind::nvrtc, .message = "NVRTC call failed", .call = call,
               .code = nvrtcGetErrorString(static_cast<nvrtcResult>(result))});
}

Compiler::Compiler(std::filesystem::path cuda_home)
    : cuda_home_(std::move(cuda_home)), toolchain_{nvrtc_version(), kKeyOptions} {}

std::vector<std::string> Compiler::include_options() const {
  const auto inc = cuda_home_ / "include";
  const auto cccl = inc / "cccl";
  if (!std::filesystem::exists(inc / "cuda_bf16.h") || !std::filesystem::exists(cccl / "cuda" / "std")) {
    throw Error({.kind = ErrorKind::io, .message = "the CUDA toolkit's headers were not found",
                 .found = inc.string(),
                 .expected = "a CUDA 13 toolkit with include/cuda_bf16.h and include/cccl/cuda/std: "
                             "set CUDA_HOME or CUDA_PATH"});
  }
  return {"-I" + inc.string(), "-I" + cccl.string()};
}

std::vector<std::string> Compiler::options(std::string_view arch, Emit emit) const {
  std::vector<std::string> opts;
  opts.push_back(fmt::format("--gpu-architecture={}", emit == Emit::cubin ? std::string(arch) : virtual_arch(arch)));
  for (const auto& o : kKeyOptions) {
    if (emit == Emit::ptx && o.starts_with("--ptxas")) continue;
    opts.push_back(o);
  }
  for (auto& o : include_options()) opts.push_back(std::move(o));
  return opts;
}

CompileOutput Compiler::compile(const Contract& contract, Emit emit) const {
  const auto start = std::chrono::steady_clock::now();
  const auto opts = options(contract.arch(), emit);
  Program prog(contract.source, fmt::format("moejit_{}.cu", contract.family()));
  for (const auto& k : contract.kernels) MOEJIT_NVRTC_CHECK(nvrtcAddNameExpression(prog.get(), k.expression.c_str()));

  std::vector<const char*> argv;
  for (const auto& o : opts) argv.push_back(o.c_str());
  const auto rc = nvrtcCompileProgram(prog.get(), static_cast<int>(argv.size()), argv.data());
  CompileOutput out;
  out.log = prog.log();
  if (rc != NVRTC_SUCCESS) {
    throw Error({.kind = ErrorKind::compile,
                 .message = fmt::format("NVRTC could not compile the {} kernel for {}", contract.family(), contract.arch()),
                 .call = "nvrtcCompileProgram", .code = nvrtcGetErrorString(rc),
                 .options = fmt::format("{}", fmt::join(opts, " ")), .log = out.log, .source = contract.source});
  }

  const auto report = parse_ptxas_report(out.log);
  for (const auto& k : contract.kernels) {
    const char* lowered = nullptr;
    MOEJIT_NVRTC_CHECK(nvrtcGetLoweredName(prog.get(), k.expression.c_str(), &lowered));
    CompiledKernel ck{k.expression, lowered, {}};
    for (const auto& [name, res] : report) {
      if (name == ck.lowered_name) ck.resources = res;
    }
    out.kernels.push_back(std::move(ck));
  }

  std::size_t size = 0;
  if (emit == Emit::cubin) {
    MOEJIT_NVRTC_CHECK(nvrtcGetCUBINSize(prog.get(), &size));
    out.binary.resize(size);
    MOEJIT_NVRTC_CHECK(nvrtcGetCUBIN(prog.get(), out.binary.data()));
  } else {
    MOEJIT_NVRTC_CHECK(nvrtcGetPTXSize(prog.get(), &size));
    out.binary.resize(size);
    MOEJIT_NVRTC_CHECK(nvrtcGetPTX(prog.get(), out.binary.data()));
    while (!out.binary.empty() && out.binary.back() == '\0') out.binary.pop_back();
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

std::vector<std::pair<std::string, KernelResources>> parse_ptxas_report(std::string_view log) {
  // ptxas info    : Function properties for NAME
  //     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
  // ptxas info    : Used 24 registers, used 1 barriers, 1024 bytes smem, 400 bytes cmem[0]
  static const std::regex kEntry(R"(Compiling entry function '([^']+)')");
  static const std::regex kProps(R"(Function properties for (\S+))");
  static const std::regex kFrame(R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex kUsed(R"(Used (\d+) registers)");
  static const std::regex kBarriers(R"(used (\d+) barriers)");
  static const std::regex kSmem(R"((\d+) bytes smem)");
  // ptxas info    : (C7518) Potential Performance Loss: wgmma.mma_async instructions are serialized
  // due to ... in the function 'NAME'
  static const std::regex kSerialized(R"(wgmma\.mma_async instructions are serialized.* in the function '([^']+)')");

  std::vector<std::pair<std::string, KernelResources>> out;
  auto entry = [&](const std::string& name) -> KernelResources& {
    for (auto& [n, r] : out) {
      if (n == name) return r;
    }
    return out.emplace_back(name, KernelResources{}).second;
  };
  std::string current;
  std::istringstream lines{std::string(log)};
  std::smatch m;
  for (std::string line; std::getline(lines, line);) {
    if (std::regex_search(line, m, kSerialized)) {
      entry(m[1]).wgmma_serialized = true;
      continue;
    }
    if (std::regex_search(line, m, kEntry) || std::regex_search(line, m, kProps)) {
      current = m[1];
      entry(current);
      continue;
    }
    if (current.empty()) continue;
    auto& r = entry(current);
    if (std::regex_search(line, m, kFrame)) {
      r.stack_bytes = to_int(m[1]);
      r.spill_store_bytes = to_int(m[2]);
      r.spill_load_bytes = to_int(m[3]);
    }
    if (std::regex_search(line, m, kUsed)) r.registers = to_int(m[1]);
    if (std::regex_search(line, m, kBarriers)) r.barriers = to_int(m[1]);
    if (std::regex_search(line, m, kSmem)) r.shared_bytes = to_int(m[1]);
  }
  return out;
}

}  // namespace moejit::detail
