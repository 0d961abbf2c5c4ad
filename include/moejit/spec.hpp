#pragma once
/// Spec files: a model's MoE layer (several ops) or a single op, parsed and validated into typed
/// op specs with defaults filled in.

#include <moejit/tensor.hpp>

#include <cstdint>

#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace moejit {

/// One validated op of a spec. Each op family derives its own (spec/ops/<op>.hpp); what it
/// compiles to is the compiler's business (moejit::contracts, contract.hpp).
class OpSpec {
 public:
  virtual ~OpSpec() = default;

  /// The op's name within its spec (`"name"`, or `<family>` / `<family>_<index>`).
  std::string name;

  /// The op family: "activation", "routing", "latent_tail", ...
  virtual std::string_view family() const noexcept = 0;
  /// The op in canonical JSON: every default filled in, keys sorted, no name.
  virtual std::string canonical_json() const = 0;
  /// The tensors the op reads and writes, in launch order.
  virtual std::vector<TensorDecl> tensors() const = 0;
  /// The largest token count the op accepts at run time (0: no limit beyond the buffers).
  virtual std::int64_t max_tokens() const noexcept { return 0; }
  /// GPUs one instance spans (tensor-parallel ranks); 1 for single-GPU ops.
  virtual int ranks() const noexcept { return 1; }
};

struct Spec {
  std::string file;                 ///< as given by the caller
  std::string model;                ///< empty for a single-op file
  std::vector<std::string> archs;   ///< targets to warm for, default sm_90a and sm_100a
  std::vector<std::shared_ptr<const OpSpec>> ops;

  /// The op with this name, or at this index ("0", "1", ...), as Context::load takes it. Throws a
  /// usage error otherwise.
  const std::shared_ptr<const OpSpec>& op(std::string_view name_or_index) const;
  std::string canonical_json() const;
};

/// Loads and validates a spec file. Throws moejit::Error (kind spec) naming the file, the JSON
/// pointer, the value found and what is allowed.
Spec load_spec(const std::filesystem::path& file);
/// Parses spec text; `file` is used in error messages only.
Spec parse_spec(std::string_view text, std::string_view file);
/// Expands arguments that are files or directories (every *.json in a directory except
/// schema.json, sorted) into spec files.
std::vector<std::filesystem::path> spec_files(std::span<const std::string> args);

/// Arch strings moejit compiles for.
bool is_supported_arch(std::string_view arch) noexcept;
/// Every arch string moejit compiles for, for messages that list them.
std::span<const std::string_view> supported_archs() noexcept;
std::vector<std::string> default_archs();

}  // namespace moejit
