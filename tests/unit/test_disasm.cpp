// --emit sass's runner of the toolkit's nvdisasm, against stand-in scripts in a CUDA_HOME of
// their own: what it is given, what it prints (past a pipe's buffer, on both streams), its
// failures, and the signals it may take.
#include <moejit/error.hpp>

#include "compiler/disasm.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include <csignal>

#include <pthread.h>
#include <unistd.h>

using namespace moejit;
using namespace moejit::detail;
namespace fs = std::filesystem;

namespace {

// A CUDA_HOME whose bin/nvdisasm is `script` (a body for `interpreter`, /bin/sh unless said; $1
// is -c, $2 the cubin).
struct FakeToolkit {
  fs::path home;
  explicit FakeToolkit(const std::string& script, const std::string& interpreter = "/bin/sh") {
    std::string dir = (fs::temp_directory_path() / "moejit-disasm-XXXXXX").string();
    REQUIRE(::mkdtemp(dir.data()) != nullptr);
    home = dir;
    fs::create_directories(home / "bin");
    if (!script.empty()) {
      std::ofstream(home / "bin" / "nvdisasm") << "#!" << interpreter << "\n" << script << "\n";
      fs::permissions(home / "bin" / "nvdisasm", fs::perms::owner_all);
    }
  }
  ~FakeToolkit() { fs::remove_all(home); }
};

ErrorFields error_of(const fs::path& home, std::string_view cubin) {
  try {
    disassemble(home, cubin);
  } catch (const Error& e) {
    return e.fields();
  }
  FAIL("no error");
  return {};
}

}  // namespace

TEST_CASE("disassemble runs $CUDA_HOME/bin/nvdisasm -c on the cubin and returns what it prints", "[disasm]") {
  // The cubin comes as a file the tool can open by name and read twice (nvdisasm seeks).
  const FakeToolkit kit(R"sh(echo "args $1 $2 $(wc -c < "$2") bytes, again $(head -c 3 "$2")"; echo "a warning" >&2)sh");
  const std::string cubin = "ELF" + std::string(997, '\x7f');
  CHECK(disassemble(kit.home, cubin) == "args -c /dev/stdin 1000 bytes, again ELF\n");
}

TEST_CASE("nvdisasm starts with no signal blocked, whatever the caller blocks", "[disasm]") {
  // The CLI blocks SIGINT, SIGTERM and SIGHUP in every thread; the tool must still die of Ctrl-C.
  // (Python, not sh: dash clears its mask as it starts.)
  const FakeToolkit kit(R"(print(next(l for l in open("/proc/self/status") if l.startswith("SigBlk")), end=""))", "/usr/bin/env python3");
  sigset_t blocked, old;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGINT);
  sigaddset(&blocked, SIGTERM);
  REQUIRE(::pthread_sigmask(SIG_BLOCK, &blocked, &old) == 0);
  const auto out = disassemble(kit.home, "x");
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  CHECK(out == "SigBlk:\t0000000000000000\n");
}

TEST_CASE("disassemble reads output past a pipe's buffer on both streams", "[disasm]") {
  // 1 MB on stdout, 256 KB on stderr, interleaved: a runner reading one stream to its end first
  // would stall the tool on the other.
  const FakeToolkit kit(R"(i=0; while [ $i -lt 16 ]; do head -c 65536 /dev/zero | tr '\0' s; head -c 16384 /dev/zero | tr '\0' e >&2; i=$((i+1)); done)");
  const auto out = disassemble(kit.home, "x");
  CHECK(out.size() == 16 * 65536);
  CHECK(out.find_first_not_of('s') == std::string::npos);
}

TEST_CASE("disassemble: no nvdisasm, one that fails, one killed: an I/O error that says so", "[disasm]") {
  const FakeToolkit none("");
  auto e = error_of(none.home, "x");
  CHECK(e.kind == ErrorKind::io);
  CHECK(e.message.find("nvdisasm was not found") != std::string::npos);
  CHECK(e.found.find((none.home / "bin" / "nvdisasm").string()) != std::string::npos);
  CHECK_THROWS_AS(find_nvdisasm(none.home), Error);

  const FakeToolkit failing(R"(echo "nvdisasm fatal : not an ELF file" >&2; exit 1)");
  e = error_of(failing.home, "not a cubin");
  CHECK(e.kind == ErrorKind::io);
  CHECK(e.message == "nvdisasm could not disassemble the cubin");
  CHECK(e.found == "exit status 1");
  CHECK(e.log == "nvdisasm fatal : not an ELF file\n");

  const FakeToolkit killed("kill -9 $$");
  CHECK(error_of(killed.home, "x").found == "signal 9");

  // A directory or a file that is not executable is no tool.
  const FakeToolkit dir("");
  fs::create_directories(dir.home / "bin" / "nvdisasm");
  CHECK(error_of(dir.home, "x").message.find("not found") != std::string::npos);
  const FakeToolkit plain("echo hi");
  fs::permissions(plain.home / "bin" / "nvdisasm", fs::perms::owner_read | fs::perms::owner_write);
  CHECK(error_of(plain.home, "x").message.find("not found") != std::string::npos);  // root too: no execute bit
}
