#pragma once
/// A contract: every input that can change the generated code of one compiled module, and
/// nothing else. Its canonical text is what the cache key hashes.

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

  /// The generated source (a stub of named constants and one explicit instantiation) and the
  /// NVRTC name expressions of its kernels. Derived from the fields; not part of the text.
  std::string source;
  std::vector<std::string> kernels;

  bool operator==(const Contract& o) const { return text() == o.text(); }

 private:
  std::string family_;
  std::string arch_;
  std::string template_name_;
  std::vector<Field> fields_;
};

/// Parses a canonical text back into its family, arch and fields (for `cache explain`).
Contract parse_contract_text(std::string_view text);

}  // namespace moejit
