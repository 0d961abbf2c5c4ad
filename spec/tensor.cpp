#include <moejit/tensor.hpp>

#include <fmt/format.h>

namespace moejit {

std::vector<std::int64_t> TensorDecl::shape_for(std::int64_t tokens) const {
  std::vector<std::int64_t> s;
  s.reserve(shape.size());
  for (const auto& e : shape) s.push_back(e.resolve(tokens));
  return s;
}

std::int64_t TensorDecl::elements_for(std::int64_t tokens) const {
  std::int64_t n = 1;
  for (const auto& e : shape) n *= e.resolve(tokens);
  return n;
}

std::size_t TensorDecl::bytes_for(std::int64_t tokens) const {
  return static_cast<std::size_t>(elements_for(tokens)) * size_of(dtype);
}

std::string TensorDecl::shape_text() const {
  std::vector<std::string> parts;
  for (const auto& e : shape) parts.push_back(e.tokens ? "T" : std::to_string(e.value));
  return fmt::format("[{}]", fmt::join(parts, ", "));
}

}  // namespace moejit
