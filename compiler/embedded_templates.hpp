#pragma once
// Kernel templates compiled into the library (cmake/MoejitEmbed.cmake), each with the content
// hash of its include closure.

#include <span>
#include <string_view>

namespace moejit::detail {

struct EmbeddedTemplate {
  std::string_view name;          ///< file name in templates/, e.g. "activation.cuh"
  std::string_view text;
  std::string_view closure_hash;  ///< XXH3-128 of the file and everything it includes
};

std::span<const EmbeddedTemplate> embedded_templates();
/// The template with this file name; throws an internal error when none is embedded.
const EmbeddedTemplate& find_template(std::string_view name);

}  // namespace moejit::detail
