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

// The length of the well-formed UTF-8 sequence at `i` (2 to 4 bytes: no overlong form, no
// surrogate, nothing past U+10FFFF), or 0 when the bytes there are not one.
std::size_t utf8_length(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[i + k]); };
  const auto c = byte(0);
  const std::size_t n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
  if (n == 0 || i + n > text.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((byte(k) & 0xC0) != 0x80) return 0;
  }
  const auto second = byte(1);
  if ((c == 0xE0 && second < 0xA0) || (c == 0xED && second > 0x9F) || (c == 0xF0 && second < 0x90) ||
      (c == 0xF4 && second > 0x8F)) {
    return 0;
  }
  return n;
}

// Appends one character of `text` at `i`, escaped when it is a control character (C1 controls,
// which UTF-8 spells as 0xC2 0x80-0x9F, too) or a byte that is not well-formed UTF-8; returns
// the bytes of `text` it consumed.
std::size_t append_escaped(std::string& out, std::string_view text, std::size_t i) {
  const auto c = static_cast<unsigned char>(text[i]);
  if (c >= 0x80) {
    const auto n = utf8_length(text, i);
    if (n == 0) {
      out += fmt::format("\\x{:02x}", c);
      return 1;
    }
    const auto second = static_cast<unsigned char>(text[i + 1]);
    if (c == 0xC2 && second <= 0x9F) out += fmt::format("\\u{:04x}", second);
    else out += text.substr(i, n);
    return n;
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
    const std::size_t next = i + append_escaped(piece, text, i);
    if (out.size() + piece.size() > max_chars) break;
    out += piece;
    i = next;
  }
  if (i < text.size()) out += fmt::format("... ({} more bytes)", text.size() - i);
  return out;
}

bool Error::is_bad_input() const noexcept {
  return fields_.kind == ErrorKind::spec || fields_.kind == ErrorKind::input ||
         fields_.kind == ErrorKind::usage || fields_.kind == ErrorKind::cache;
}

}  // namespace moejit
