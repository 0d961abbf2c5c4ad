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

// The most any other one-line field (file, pointer, message, expected, call, code) prints.
constexpr std::size_t kMaxLineChars = 2000;

// Appends one byte of `text` at `i`, escaped when it is a control character; returns the bytes
// of `text` it consumed (2 for a C1 control, which UTF-8 spells as 0xC2 0x80-0x9F).
std::size_t append_escaped(std::string& out, std::string_view text, std::size_t i) {
  const auto c = static_cast<unsigned char>(text[i]);
  if (c == 0xC2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
      static_cast<unsigned char>(text[i + 1]) <= 0x9F) {
    out += fmt::format("\\u{:04x}", static_cast<unsigned char>(text[i + 1]));
    return 2;
  }
  switch (c) {
    case '\n': out += "\\n"; break;
    case '\r': out += "\\r"; break;
    case '\t': out += "\\t"; break;
    default:
      if (c < 0x20 || c == 0x7F) out += fmt::format("\\x{:02x}", c);
      else out += static_cast<char>(c);
  }
  return 1;
}

// A message embeds the user's text in quotes ("unknown kind 'x'"): each quoted span is cut like
// a value, the rest only escaped, and the whole cut at the line limit.
std::string printable_message(std::string_view text) {
  std::string out;
  std::size_t i = 0;
  while (i < text.size()) {
    const auto open = text.find_first_of("'\"", i);
    const auto close = open == std::string_view::npos ? open : text.find(text[open], open + 1);
    if (close == std::string_view::npos) {
      out += detail::printable(text.substr(i), std::string_view::npos);
      break;
    }
    out += detail::printable(text.substr(i, open + 1 - i), std::string_view::npos);
    out += detail::printable(text.substr(open + 1, close - open - 1), detail::kMaxValueChars);
    out += text[close];
    i = close + 1;
  }
  return detail::printable(out, kMaxLineChars);
}

// "file: /pointer: message: found X; expected Y" with the empty parts left out, then the call,
// and for compile errors the options, the log and the generated source on their own lines.
// NOTE: every one-line part goes through printable(): a value with a newline or an escape
// sequence, or 20,000 characters long, must not break or flood the one line a CLI prints.
std::string format_error(const ErrorFields& f) {
  using detail::printable;
  std::string out;
  if (!f.file.empty()) out += printable(f.file, kMaxLineChars) + ": ";
  if (!f.pointer.empty()) out += printable(f.pointer, kMaxLineChars) + ": ";
  out += f.message.empty() ? std::string(to_string(f.kind)) : printable_message(f.message);
  if (!f.found.empty()) out += fmt::format("; found {}", printable(f.found));
  if (!f.expected.empty()) out += fmt::format("; expected {}", printable(f.expected, kMaxLineChars));
  const auto code = printable(f.code, kMaxLineChars);
  if (!f.call.empty()) out += fmt::format(" [{}{}]", printable(f.call, kMaxLineChars), code.empty() ? "" : ": " + code);
  else if (!code.empty()) out += fmt::format(" [{}]", code);
  if (!f.options.empty()) out += fmt::format("\n--- options ---\n{}", f.options);
  if (!f.log.empty()) out += fmt::format("\n--- log ---\n{}", f.log);
  if (!f.source.empty()) out += fmt::format("\n--- generated source ---\n{}", f.source);
  return out;
}

}  // namespace

Error::Error(ErrorFields fields) : fields_(std::move(fields)), what_(format_error(fields_)) {}

std::string detail::printable(std::string_view text, std::size_t max_chars) {
  std::string out;
  std::size_t i = 0;
  while (i < text.size()) {
    // One character: its escape, or its bytes (a UTF-8 sequence is never cut).
    std::string piece;
    std::size_t next = i + append_escaped(piece, text, i);
    while (next < text.size() && (static_cast<unsigned char>(text[next]) & 0xC0) == 0x80) piece += text[next++];
    if (out.size() + piece.size() > max_chars) break;
    out += piece;
    i = next;
  }
  if (i < text.size()) out += fmt::format("... ({} more bytes)", text.size() - i);
  return out;
}

bool Error::is_bad_input() const noexcept {
  return fields_.kind == ErrorKind::spec || fields_.kind == ErrorKind::input ||
         fields_.kind == ErrorKind::usage;
}

}  // namespace moejit
