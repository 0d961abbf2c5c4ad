#pragma once
/// moejit's one error type. Every failure the library reports is a moejit::Error whose fields
/// say where (file + JSON pointer, or the API call), what was found and what was expected.

#include <cstddef>
#include <exception>
#include <string>
#include <string_view>

namespace moejit {

/// What went wrong, coarsely: the CLI maps bad input (spec, input, usage, cache) to exit code 2.
enum class ErrorKind {
  spec,       ///< a spec file is malformed or names an invalid value
  input,      ///< a tensor, file or argument given at run time does not fit the op
  usage,      ///< an API or CLI misuse (unknown op name, wrong arch string, ...)
  compile,    ///< NVRTC rejected generated code (a moejit bug, never the user's spec)
  nvrtc,      ///< an NVRTC call failed
  driver,     ///< a CUDA driver call failed, or no driver/GPU is present
  nccl,       ///< a NCCL call failed or a peer did not arrive
  cache,      ///< the cache directory is unsafe (a link inside it, another user's or a group- or
              ///< world-writable directory, what is not a file or directory): refused, never used
  io,         ///< a filesystem operation failed
  internal,   ///< an invariant of moejit itself broke
};

std::string_view to_string(ErrorKind kind) noexcept;

/// The fields of an error. Empty fields are simply not printed.
struct ErrorFields {
  ErrorKind kind = ErrorKind::internal;
  std::string message;   ///< one sentence: what is wrong
  std::string file;      ///< the spec or data file involved
  std::string pointer;   ///< JSON pointer inside `file` (`/ops/1/beta`), or a tensor name
  std::string call;      ///< the API call that failed (`cuLibraryLoadData`, `nvrtcCompileProgram`)
  std::string code;      ///< the API's error name (`CUDA_ERROR_NO_DEVICE`)
  std::string found;     ///< the value that was found
  std::string expected;  ///< what is allowed
  std::string options;   ///< compile options, for compile errors
  std::string log;       ///< the compiler log, for compile errors
  std::string source;    ///< the generated source, for compile errors
};

class Error : public std::exception {
 public:
  explicit Error(ErrorFields fields);

  const char* what() const noexcept override { return what_.c_str(); }
  ErrorKind kind() const noexcept { return fields_.kind; }
  const ErrorFields& fields() const noexcept { return fields_; }
  /// True when the user's input is at fault (spec, run-time input, usage, an unsafe cache
  /// directory): CLI exit code 2.
  bool is_bad_input() const noexcept;

 private:
  ErrorFields fields_;
  std::string what_;
};

namespace detail {

/// The most of a value (`found`, or a quoted value inside a message) an error prints.
inline constexpr std::size_t kMaxValueChars = 200;

/// `text` made fit for one line of a terminal: control characters escaped (`\n`, `\t`, `\x1b`,
/// C1 controls as `\u009b`), bytes that are not well-formed UTF-8 as `\xff`, and, where the
/// result would pass `max_chars`, cut at a character boundary with a note of how many bytes
/// were left out. Every field of an Error but the multi-line ones (options, log, source) is
/// printed through it.
std::string printable(std::string_view text, std::size_t max_chars = kMaxValueChars);

}  // namespace detail

}  // namespace moejit
