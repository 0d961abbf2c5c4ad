// An audit of the driver entry points moejit resolves with cuGetProcAddress: for each, the
// newest ABI variant in cudaTypedefs.h must be the prototype cuda.h declares (the name cuda.h
// maps it to), except where runtime/driver.cpp asks for an older version on purpose. CUDA 13's
// cuCtxSynchronize(CUcontext) slipped past this once and crashed the latent tail.
#include <catch2/catch.hpp>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>

namespace {

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("every resolved driver entry point matches the ABI cuda.h declares", "[driver]") {
  const std::string cuda_inc = MOEJIT_CUDA_INCLUDE;
  const auto typedefs = read(cuda_inc + "/cudaTypedefs.h");
  const auto cuda_h = read(cuda_inc + "/cuda.h");
  const auto driver = read(MOEJIT_SOURCE_DIR "/runtime/driver.hpp");
  REQUIRE_FALSE(typedefs.empty());
  const auto list = driver.substr(driver.find("#define MOEJIT_DRIVER_FUNCTIONS"));
  std::smatch m;
  int audited = 0;
  const std::regex entry(R"(X\((cu\w+)\))");
  for (auto it = std::sregex_iterator(list.begin(), list.end(), entry); it != std::sregex_iterator(); ++it) {
    const std::string name = (*it)[1];
    // The newest variant's version and parameter list.
    int newest = 0;
    std::string newest_params;
    const std::regex td("typedef CUresult \\(CUDAAPI \\*PFN_" + name + "_v(\\d+)\\)\\(([^)]*)\\);");
    for (auto t = std::sregex_iterator(typedefs.begin(), typedefs.end(), td); t != std::sregex_iterator(); ++t) {
      const int v = std::stoi((*t)[1]);
      if (v > newest) newest = v, newest_params = (*t)[2];
    }
    INFO(name);
    REQUIRE(newest > 0);
    // What cuda.h declares under that name (after its renaming macro, if any).
    std::string target = name;
    if (std::regex_search(cuda_h, m, std::regex("#define " + name + "\\s+(?:__CUDA_API_PT[SD][ZS]\\()?(\\w+)"))) target = m[1];
    if (target != name) continue;  // renamed to a versioned symbol: the header follows the newest ABI
    std::smatch decl;
    REQUIRE(std::regex_search(cuda_h, decl, std::regex("CUresult CUDAAPI " + name + "\\(([^)]*)\\);")));
    // The parameter types alone: names dropped, CUdeviceptr_v2 read as CUdeviceptr.
    auto squash = [](std::string s) {
      s = std::regex_replace(s, std::regex(R"((\w)_v\d+\b)"), "$1");
      std::string out;
      std::stringstream params(s);
      for (std::string p; std::getline(params, p, ',');) {
        p = std::regex_replace(p, std::regex(R"(\s+)"), " ");
        p = std::regex_replace(p, std::regex(R"(^ | $)"), "");
        if (p.find(' ') != std::string::npos || p.find('*') != std::string::npos) {
          p = std::regex_replace(p, std::regex(R"(\w+$)"), "");  // the name; '*' stays
        }
        out += std::regex_replace(p, std::regex(" "), "") + ";";
      }
      return out;
    };
    const bool same = squash(decl[1]) == squash(newest_params);
    if (name == "cuCtxSynchronize") {
      CHECK_FALSE(same);  // known: driver.cpp asks for version 2000
    } else {
      CHECK(same);
    }
    ++audited;
  }
  CHECK(audited > 20);
}
