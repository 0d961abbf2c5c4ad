#include "npy.hpp"

#include <moejit/error.hpp>

#include "cache/fs.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <bit>
#include <limits>
#include <optional>

namespace moejit::tools {

std::string_view npy_descr(NpyType t) noexcept {
  switch (t) {
    case NpyType::f32: return "<f4";
    case NpyType::f16: return "<f2";
    case NpyType::u16: return "<u2";
    case NpyType::i32: return "<i4";
    case NpyType::i64: return "<i8";
  }
  return "?";
}

std::size_t npy_itemsize(NpyType t) noexcept {
  switch (t) {
    case NpyType::f32: return 4;
    case NpyType::f16: return 2;
    case NpyType::u16: return 2;
    case NpyType::i32: return 4;
    case NpyType::i64: return 8;
  }
  return 0;
}

NpyType npy_type_for(DType t) noexcept {
  switch (t) {
    case DType::f32: return NpyType::f32;
    case DType::f16: return NpyType::f16;
    case DType::bf16: return NpyType::u16;
    case DType::i32: return NpyType::i32;
    case DType::i64: return NpyType::i64;
  }
  return NpyType::f32;
}

std::string_view npy_type_name(NpyType t) noexcept {
  switch (t) {
    case NpyType::f32: return "float32";
    case NpyType::f16: return "float16";
    case NpyType::u16: return "uint16";
    case NpyType::i32: return "int32";
    case NpyType::i64: return "int64";
  }
  return "?";
}

namespace {

constexpr std::string_view kMagic = "\x93NUMPY";
constexpr std::size_t kArrayAlign = 64;    // NumPy's ARRAY_ALIGN
constexpr std::size_t kGrowthDigits = 21;  // NumPy's GROWTH_AXIS_MAX_DIGITS
constexpr std::size_t kMaxV1HeaderLen = 0xffff;
constexpr std::string_view kSupportedDescrs = "'<f4', '<f2', '<u2', '<i4' or '<i8'";
constexpr NpyType kAllTypes[] = {NpyType::f32, NpyType::f16, NpyType::u16, NpyType::i32,
                                 NpyType::i64};

// Where an error is: the file and the tensor name, carried through the parse.
struct Where {
  std::string_view file;
  std::string_view name;
};

[[noreturn]] void fail(const Where& where, std::string message, std::string found,
                       std::string expected) {
  throw Error({.kind = ErrorKind::input,
               .message = std::move(message),
               .file = std::string(where.file),
               .pointer = std::string(where.name),
               .found = std::move(found),
               .expected = std::move(expected)});
}

// Double-quotes bytes for a message, escaping what would not print (the header may be latin-1
// or utf-8, or not text at all when the magic is wrong). Double quotes, because the header
// itself is full of single ones.
std::string show(std::string_view bytes) {
  std::string out = "\"";
  for (char c : bytes) {
    auto u = static_cast<unsigned char>(c);
    const bool plain = u >= 0x20 && u < 0x7f && c != '\\' && c != '"';
    out += plain ? std::string(1, c) : fmt::format("\\x{:02x}", u);
  }
  return out + "\"";
}

std::string shape_repr(const std::vector<std::int64_t>& shape) {
  if (shape.size() == 1) return fmt::format("({},)", shape[0]);
  return fmt::format("({})", fmt::join(shape, ", "));
}

// The byte size of an array of `shape`, or nullopt when a dimension is negative or the size
// does not fit in int64. Like NumPy, zero dimensions are skipped in the overflow check, so
// (2**62, 2**62, 0) is too large even though it holds no element.
std::optional<std::uint64_t> checked_nbytes(const std::vector<std::int64_t>& shape,
                                            std::size_t itemsize) {
  constexpr auto kLimit = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  std::uint64_t nbytes = itemsize;
  bool empty = false;
  for (std::int64_t dim : shape) {
    if (dim < 0) return std::nullopt;
    if (dim == 0) {
      empty = true;
      continue;
    }
    auto d = static_cast<std::uint64_t>(dim);
    if (nbytes > kLimit / d) return std::nullopt;
    nbytes *= d;
  }
  return empty ? 0 : nbytes;
}

// ---- Header dict parser -------------------------------------------------------------------
// A strict parser for exactly the Python-literal subset NumPy writes:
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// Strings in single or double quotes without escapes, True/False, tuples of non-negative
// decimal integers; any spacing, keys in any order, an optional trailing comma.

struct Header {
  std::optional<std::string> descr;
  std::optional<bool> fortran_order;
  std::optional<std::vector<std::int64_t>> shape;
};

class HeaderParser {
 public:
  HeaderParser(std::string_view text, const Where& where) : text_(text), where_(where) {}

  Header parse() {
    skip_space();
    expect('{', "'{' opening the header dict");
    skip_space();
    Header header;
    while (!at('}')) {
      parse_entry(header);
      skip_space();
      if (at(',')) {
        ++pos_;
        skip_space();
      } else if (!at('}')) {
        malformed("expected ',' or '}' after a dict entry", "',' or '}'");
      }
    }
    ++pos_;
    skip_space();
    if (pos_ != text_.size()) {
      malformed("trailing garbage after the header dict", "only spaces and a final newline");
    }
    return header;
  }

 private:
  void parse_entry(Header& header) {
    if (!at('\'') && !at('"')) {
      malformed("expected a quoted key", "'descr', 'fortran_order' or 'shape'");
    }
    std::string key = parse_string("a key");
    skip_space();
    expect(':', "':' after the key");
    skip_space();
    if (key == "descr" && at('[')) {
      // NumPy writes a structured dtype's descr as a list of fields.
      fail(where_, "unsupported dtype: structured arrays are not supported", token(),
           std::string(kSupportedDescrs));
    } else if (key == "descr") {
      set_once(header.descr, parse_string("the value of 'descr'"), key);
    } else if (key == "fortran_order") {
      set_once(header.fortran_order, parse_bool(), key);
    } else if (key == "shape") {
      set_once(header.shape, parse_shape(), key);
    } else {
      // NumPy itself refuses headers with other keys.
      fail(where_, "malformed .npy header: unknown key", show(key),
           "only 'descr', 'fortran_order' and 'shape'");
    }
  }

  template <typename T>
  void set_once(std::optional<T>& slot, T value, std::string_view key) {
    if (slot) fail(where_, "malformed .npy header: repeated key", show(key), "each key once");
    slot = std::move(value);
  }

  std::string parse_string(std::string_view what) {
    if (!at('\'') && !at('"')) {
      malformed(fmt::format("{} must be a quoted string", what), "a string");
    }
    const char quote = text_[pos_++];
    const std::size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] != quote && text_[pos_] != '\n') {
      // NOTE: escapes never occur in what NumPy writes; refusing them keeps the parser exact.
      if (text_[pos_] == '\\') {
        malformed(fmt::format("{} has an escape sequence", what), "a string without backslashes");
      }
      ++pos_;
    }
    if (!at(quote)) {
      fail(where_, fmt::format("malformed .npy header: {} is an unterminated string", what),
           show(text_.substr(start - 1, 24)), fmt::format("a closing {}", quote));
    }
    return std::string(text_.substr(start, pos_++ - start));
  }

  bool parse_bool() {
    constexpr std::pair<std::string_view, bool> kWords[] = {{"True", true}, {"False", false}};
    for (auto [word, value] : kWords) {
      if (text_.substr(pos_, word.size()) == word && !is_word_char(word.size())) {
        pos_ += word.size();
        return value;
      }
    }
    malformed("the value of 'fortran_order' must be True or False", "True or False");
  }

  std::vector<std::int64_t> parse_shape() {
    if (!at('(')) malformed("the value of 'shape' must be a tuple", "a tuple such as (2, 3)");
    ++pos_;
    skip_space();
    std::vector<std::int64_t> shape;
    bool comma = false;  // `(5)` is the integer 5 in Python, not a tuple
    while (!at(')')) {
      shape.push_back(parse_dim());
      skip_space();
      comma = at(',');
      if (comma) {
        ++pos_;
        skip_space();
      } else if (!at(')')) {
        malformed("expected ',' or ')' in the shape tuple", "',' or ')'");
      }
    }
    ++pos_;
    if (shape.size() == 1 && !comma) {
      fail(where_, "malformed .npy header: the shape is not a tuple", fmt::format("({})", shape[0]),
           fmt::format("({},)", shape[0]));
    }
    return shape;
  }

  std::int64_t parse_dim() {
    constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    const std::size_t start = pos_;
    if (at('-')) {
      fail(where_, "malformed .npy header: negative dimension in 'shape'", token(),
           "a non-negative integer");
    }
    std::uint64_t value = 0;
    while (pos_ < text_.size() && is_digit(text_[pos_])) {
      auto digit = static_cast<std::uint64_t>(text_[pos_] - '0');
      if (value > (kMax - digit) / 10) {
        fail(where_, "malformed .npy header: dimension in 'shape' is too large", token_at(start),
             fmt::format("at most {}", kMax));
      }
      value = value * 10 + digit;
      ++pos_;
    }
    // Python's own grammar: no leading zeros, and nothing glued on (2.0, 2L, 0x2).
    const bool leading_zero = pos_ - start > 1 && text_[start] == '0';
    if (pos_ == start || leading_zero || is_word_char(0) || at('.')) {
      pos_ = start;
      fail(where_, "malformed .npy header: 'shape' entry is not an integer", token(),
           "a non-negative decimal integer");
    }
    return static_cast<std::int64_t>(value);
  }

  static bool is_digit(char c) { return c >= '0' && c <= '9'; }

  // Whether the character `offset` past the cursor continues an identifier or number.
  bool is_word_char(std::size_t offset) const {
    if (pos_ + offset >= text_.size()) return false;
    char c = text_[pos_ + offset];
    return is_digit(c) || c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  }

  bool at(char c) const { return pos_ < text_.size() && text_[pos_] == c; }

  static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

  void skip_space() {
    while (pos_ < text_.size() && is_space(text_[pos_])) ++pos_;
  }

  void expect(char c, std::string_view what) {
    if (!at(c)) malformed(fmt::format("expected {}", what), fmt::format("'{}'", c));
    ++pos_;
  }

  // The token under the cursor, quoted for messages: up to the next separator.
  std::string token() const { return token_at(pos_); }
  std::string token_at(std::size_t start) const {
    if (start >= text_.size()) return "the end of the header";
    std::size_t end = start;
    while (end < text_.size() && end - start < 24) {
      const char c = text_[end];
      if (is_space(c) || c == ',' || c == ')' || c == '}') break;
      ++end;
    }
    if (end == start) ++end;
    return show(text_.substr(start, end - start));
  }

  [[noreturn]] void malformed(std::string what, std::string expected) {
    std::string found =
        pos_ >= text_.size() ? "the end of the header" : show(text_.substr(pos_, 16));
    fail(where_, "malformed .npy header: " + what, std::move(found), std::move(expected));
  }

  std::string_view text_;
  Where where_;
  std::size_t pos_ = 0;
};

std::string_view trim_end(std::string_view text) {
  while (!text.empty() && (text.back() == ' ' || text.back() == '\n')) text.remove_suffix(1);
  return text;
}

// ---- Checking the parsed header --------------------------------------------------------------

NpyType parse_descr(std::string_view descr, const Where& where) {
  constexpr bool kLittleHost = std::endian::native == std::endian::little;
  const std::string expected(kSupportedDescrs);
  if (descr.empty()) fail(where, "unsupported dtype", show(descr), expected);
  const char order = descr[0];
  if (order == '>' || (!kLittleHost && (order == '=' || order == '|'))) {
    fail(where, "big-endian data is not supported", show(descr), expected);
  }
  // '|' ("not applicable") and '=' (native) name the little-endian type on a little host.
  if (order == '<' || order == '|' || order == '=') {
    for (NpyType t : kAllTypes) {
      if (descr.substr(1) == npy_descr(t).substr(1)) return t;
    }
  }
  fail(where, "unsupported dtype", show(descr), expected);
}

NpyArray parse_header(std::string_view text, const Where& where) {
  Header header = HeaderParser(text, where).parse();
  const std::pair<bool, std::string_view> keys[] = {
      {header.descr.has_value(), "descr"},
      {header.fortran_order.has_value(), "fortran_order"},
      {header.shape.has_value(), "shape"}};
  for (auto [present, key] : keys) {
    if (!present) {
      fail(where, fmt::format("malformed .npy header: missing key '{}'", key),
           show(trim_end(text.substr(0, 96))), "'descr', 'fortran_order' and 'shape'");
    }
  }
  if (*header.fortran_order) {
    fail(where, "array is not C order (fortran_order is True)", "fortran_order True",
         "fortran_order False");
  }
  return NpyArray{
      .type = parse_descr(*header.descr, where), .shape = std::move(*header.shape), .data = {}};
}

// The little-endian unsigned integer of `size` bytes at `at`.
std::uint32_t read_le(std::string_view bytes, std::size_t at, std::size_t size) {
  std::uint32_t value = 0;
  for (std::size_t i = size; i-- > 0;) {
    value = (value << 8) | static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[at + i]));
  }
  return value;
}

// Returns [header text, data] after checking magic, version and the header length.
std::pair<std::string_view, std::string_view> split(std::string_view bytes, const Where& where) {
  const std::string_view head = bytes.substr(0, kMagic.size());
  if (head != kMagic.substr(0, head.size())) {
    fail(where, "not a .npy file (bad magic)", show(head), show(kMagic));
  }
  if (bytes.size() < kMagic.size() + 2) {
    fail(where, "truncated .npy file: too short for the magic and version",
         fmt::format("{} bytes", bytes.size()), "at least 8 bytes");
  }
  const auto major = static_cast<unsigned char>(bytes[6]);
  const auto minor = static_cast<unsigned char>(bytes[7]);
  if (minor != 0 || major < 1 || major > 3) {
    fail(where, "unsupported .npy format version", fmt::format("{}.{}", major, minor),
         "1.0, 2.0 or 3.0");
  }
  const std::size_t len_size = major == 1 ? 2 : 4;
  const std::size_t prefix = 8 + len_size;
  if (bytes.size() < prefix) {
    fail(where, "truncated .npy header: no header length", fmt::format("{} bytes", bytes.size()),
         fmt::format("at least {} bytes", prefix));
  }
  // NOTE: 3.0 differs from 2.0 only in allowing utf-8 instead of latin-1 in the header; the
  // grammar accepted here is ASCII outside strings and compares strings bytewise, so one
  // parser serves all three versions.
  const std::size_t header_len = read_le(bytes, 8, len_size);
  if (header_len > bytes.size() - prefix) {
    fail(where, "truncated .npy header", fmt::format("{} header bytes", bytes.size() - prefix),
         fmt::format("{} header bytes", header_len));
  }
  return {bytes.substr(prefix, header_len), bytes.substr(prefix + header_len)};
}

// The header length once padded with spaces and a '\n' so that the data starts on a
// kArrayAlign boundary. Like NumPy, an already aligned header still gets a full block of padding.
std::size_t padded_header_len(std::size_t header_size, std::size_t len_size) {
  const std::size_t used = kMagic.size() + 2 + len_size + header_size + 1;
  return header_size + 1 + kArrayAlign - used % kArrayAlign;
}

}  // namespace

std::int64_t NpyArray::elements() const {
  std::optional<std::uint64_t> n = checked_nbytes(shape, 1);
  if (!n) {
    throw Error({.kind = ErrorKind::internal,
                 .message = "NpyArray shape is invalid",
                 .found = shape_repr(shape),
                 .expected = "non-negative dimensions whose product fits in int64"});
  }
  return static_cast<std::int64_t>(*n);
}

NpyArray parse_npy(std::string_view bytes, std::string_view file, std::string_view name) {
  const Where where{file, name};
  auto [header_text, data] = split(bytes, where);
  NpyArray array = parse_header(header_text, where);
  const std::string what = fmt::format("{} {}", npy_type_name(array.type), shape_repr(array.shape));
  std::optional<std::uint64_t> nbytes = checked_nbytes(array.shape, npy_itemsize(array.type));
  if (!nbytes || *nbytes > std::numeric_limits<std::size_t>::max()) {
    fail(where, "shape is too large", shape_repr(array.shape),
         "a size in bytes that fits in int64");
  }
  if (data.size() < *nbytes) {
    fail(where, "truncated .npy data", fmt::format("{} data bytes", data.size()),
         fmt::format("{} bytes for {}", *nbytes, what));
  }
  if (data.size() > *nbytes) {
    fail(where, "extra bytes after the .npy data", fmt::format("{} data bytes", data.size()),
         fmt::format("{} bytes for {}", *nbytes, what));
  }
  array.data = std::string(data);
  return array;
}

NpyArray read_npy(const std::filesystem::path& file, std::string_view name) {
  const auto bytes = detail::read_input_file({.path = file, .what = ".npy file", .max_bytes = kMaxNpyBytes,
                                              .pointer = std::string(name)});
  return parse_npy(bytes, file.string(), name);
}

std::string format_npy(const NpyArray& array) {
  std::optional<std::uint64_t> nbytes = checked_nbytes(array.shape, npy_itemsize(array.type));
  if (!nbytes || *nbytes != array.data.size()) {
    throw Error(
        {.kind = ErrorKind::internal,
         .message = "NpyArray data does not match its shape",
         .found = fmt::format("{} data bytes", array.data.size()),
         .expected = fmt::format("{} {}", npy_type_name(array.type), shape_repr(array.shape))});
  }
  // Exactly np.save's header, spare spaces included (room to grow the first axis in place).
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}",
                                   npy_descr(array.type), shape_repr(array.shape));
  if (!array.shape.empty()) {
    header.append(kGrowthDigits - fmt::formatted_size("{}", array.shape[0]), ' ');
  }
  // Version 1.0 stores the header length in 2 bytes; 2.0 in 4, for longer headers.
  std::size_t len_size = 2;
  std::size_t padded = padded_header_len(header.size(), len_size);
  if (padded > kMaxV1HeaderLen) {
    len_size = 4;
    padded = padded_header_len(header.size(), len_size);
  }
  std::string out(kMagic);
  out += static_cast<char>(len_size == 2 ? 1 : 2);
  out += '\0';
  for (std::size_t i = 0; i < len_size; ++i) out += static_cast<char>((padded >> (8 * i)) & 0xff);
  out += header;
  out.append(padded - header.size() - 1, ' ');
  out += '\n';
  out += array.data;
  return out;
}

void write_npy(const std::filesystem::path& file, const NpyArray& array) {
  detail::write_output_file(file, format_npy(array));
}

}  // namespace moejit::tools
