#include <moejit/error.hpp>

#include <fmt/format.h>

namespace moejit {

std::string_view to_string(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::spec: return "spec error";
    case ErrorKind::input: return "input error";
    case ErrorKind::usage: return "usage error";
    case ErrorKind::compile: return "compile error";
    case ErrorKind::nvrtc: return "NVRTC error";
    case ErrorKind::driver: return "CUDA driver error";
    case ErrorKind::nccl: return "NCCL error";
    case ErrorKind::cache: return "cache error";
    case ErrorKind::io: return "I/O error";
    case ErrorKind::internal: return "internal error";
  }
  return "error";
}

namespace {

// "file: /pointer: message: found X; expected Y" with the empty parts left out, then the call,
// and for compile errors the options, the log and the generated source on their own lines.
std::string format_error(const ErrorFields& f) {
  std::string out;
  if (!f.file.empty()) out += f.file + ": ";
  if (!f.pointer.empty()) out += f.pointer + ": ";
  out += f.message.empty() ? std::string(to_string(f.kind)) : f.message;
  if (!f.found.empty()) out += fmt::format("; found {}", f.found);
  if (!f.expected.empty()) out += fmt::format("; expected {}", f.expected);
  if (!f.call.empty()) out += fmt::format(" [{}{}]", f.call, f.code.empty() ? "" : ": " + f.code);
  else if (!f.code.empty()) out += fmt::format(" [{}]", f.code);
  if (!f.options.empty()) out += fmt::format("\n--- options ---\n{}", f.options);
  if (!f.log.empty()) out += fmt::format("\n--- log ---\n{}", f.log);
  if (!f.source.empty()) out += fmt::format("\n--- generated source ---\n{}", f.source);
  return out;
}

}  // namespace

Error::Error(ErrorFields fields) : fields_(std::move(fields)), what_(format_error(fields_)) {}

bool Error::is_bad_input() const noexcept {
  return fields_.kind == ErrorKind::spec || fields_.kind == ErrorKind::input ||
         fields_.kind == ErrorKind::usage;
}

}  // namespace moejit
