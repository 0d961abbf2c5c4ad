#pragma once
/// A contract: every input that can change the generated code of one compiled module, and
/// nothing else. Its canonical text is what the cache key hashes.

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace moejit {

class Contract {
 public:
  struct Field {
    std::string name;
    std::string value;
    bool operator==(const Field&) const = default;
  };

  Contract(std::string family, std::string arch, std::string template_name);

  /// Appends a field; fields keep the order in which the op declares them.
  Contract& set(std::string name, std::string value);

  const std::string& family() const noexcept { return family_; }
  const std::string& arch() const noexcept { return arch_; }
  const std::string& template_name() const noexcept { return template_name_; }
  const std::vector<Field>& fields() const noexcept { return fields_; }
  /// The value of a field, or empty when absent.
  std::string_view get(std::string_view name) const noexcept;

  /// The canonical text: a header line, then `family`, `template`, `arch` and one `name value`
  /// line per field. Equal contracts have equal texts and only they do.
  std::string text() const;

  /// One kernel of the module: the role launchers ask for it by ("warp_vectors", "block",
  /// "fused", ...), its NVRTC name expression, and the dynamic shared memory its launcher asks
  /// for (bytes; kSharedAtLoad where the device's limits decide it when the op is loaded).
  struct Kernel {
    std::string role;
    std::string expression;
    int dynamic_shared = 0;
    bool operator==(const Kernel&) const = default;
  };
  static constexpr int kSharedAtLoad = -1;

  /// The generated source (a stub of named constants and one explicit instantiation) and its
  /// kernels. Derived from the fields; not part of the text.
  std::string source;
  std::vector<Kernel> kernels;
  /// The index of the kernel with this role in `kernels`; throws moejit::Error (internal) when
  /// the contract has none.
  std::size_t kernel_index(std::string_view role) const;
  /// The kernel with this role (kernel_index's).
  const Kernel& kernel(std::string_view role) const { return kernels[kernel_index(role)]; }
  bool has_kernel(std::string_view role) const noexcept;

  bool operator==(const Contract& o) const { return text() == o.text(); }

 private:
  std::string family_;
  std::string arch_;
  std::string template_name_;
  std::vector<Field> fields_;
};

class OpSpec;

/// The contracts (one per compiled module) an op of a spec needs on `arch` (compiler/ops/).
std::vector<Contract> contracts(const OpSpec& op, std::string_view arch);

/// Parses a canonical text back into its family, arch and fields (for `cache explain`).
Contract parse_contract_text(std::string_view text);

}  // namespace moejit
