#pragma once
// The canonical spelling of numbers in a spec's canonical JSON and a contract's text.

#include <string>

namespace moejit::detail {

/// Shortest decimal that reads back as the same float: the contract's spelling of a float.
std::string canonical_float(float x);
/// The float as the double its shortest decimal spells (1.702f -> 1.702): for canonical JSON.
double canonical_number(float x);

}  // namespace moejit::detail
