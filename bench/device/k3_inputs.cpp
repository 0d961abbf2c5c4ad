// The bench's Kimi-K3 router inputs as .npy files for `moejit run` (diag50.sh ... diag52.sh):
// the same draws as `moejit bench` (reference::Rng(1234) = std::mt19937_64, then
// RoutingHarness::fill_inputs, variant 0: per token one unused draw and 896 logits ~ N(0, 2),
// then the bias ~ N(0, 0.5) -- drawn after the logits, so each T has its own bias).
//   g++ -O2 -std=c++20 -o /tmp/k3_inputs bench/device/k3_inputs.cpp && /tmp/k3_inputs .carry/k3in
#include <random>
#include <vector>
#include <cstdio>
#include <string>
static void npy(const std::string& path, const std::vector<float>& v, const std::string& shape) {
  FILE* f = fopen(path.c_str(), "wb");
  std::string h = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + shape + "), }";
  while ((10 + h.size() + 1) % 64) h += ' ';
  h += '\n';
  unsigned short n = h.size();
  fwrite("\x93NUMPY\x01\x00", 1, 8, f); fwrite(&n, 2, 1, f); fwrite(h.data(), 1, h.size(), f);
  fwrite(v.data(), 4, v.size(), f); fclose(f);
}
int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : ".carry/k3in";
  const int E = 896;
  for (int T : {2, 4, 8, 64, 128}) {
    std::mt19937_64 rng(1234);
    std::normal_distribution<float> normal(0.0f, 2.0f);
    std::vector<float> x((size_t)T * E), b(E);
    for (int t = 0; t < T; ++t) { (void)normal(rng); for (int e = 0; e < E; ++e) x[(size_t)t * E + e] = normal(rng); }
    std::normal_distribution<float> bias(0.0f, 0.5f);
    for (int e = 0; e < E; ++e) b[e] = bias(rng);
    npy(dir + "/logits_" + std::to_string(T) + ".npy", x, std::to_string(T) + ", " + std::to_string(E));
    npy(dir + "/bias_" + std::to_string(T) + ".npy", b, std::to_string(E) + ",");
  }
}
