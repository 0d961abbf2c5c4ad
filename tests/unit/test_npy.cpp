// Tests for the .npy reader/writer: round trips, NumPy's own bytes, header variants, and every
// malformed input the reader must refuse with a clear input error.

#include "tools/npy.hpp"

#include <moejit/error.hpp>

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <string_view>
#include <vector>

using moejit::tools::format_npy;
using moejit::tools::NpyArray;
using moejit::tools::NpyType;
using moejit::tools::parse_npy;
using namespace std::string_view_literals;

namespace {

// ---- NumPy's own bytes -------------------------------------------------------------------------
// Written by NumPy 2.4.6 (np.lib.format.write_array, which np.save calls); NumPy 1.23+ writes the
// same bytes. Octal escapes because a hex escape would swallow a following hex digit.

// Arange23V1
constexpr std::string_view kArange23V1 =
    "\223NUMPY\001\000v\000{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }   "
    "                                                       \012\000\000\000\000\000\000\200"
    "?\000\000\000@\000\000@@\000\000\200@\000\000\240@"sv;

// Arange23V2
constexpr std::string_view kArange23V2 =
    "\223NUMPY\002\000t\000\000\000{'descr': '<f4', 'fortran_order': False, 'shape': (2, "
    "3), }                                                        \012\000\000\000\000\000"
    "\000\200?\000\000\000@\000\000@@\000\000\200@\000\000\240@"sv;

// Arange23V3
constexpr std::string_view kArange23V3 =
    "\223NUMPY\003\000t\000\000\000{'descr': '<f4', 'fortran_order': False, 'shape': (2, "
    "3), }                                                        \012\000\000\000\000\000"
    "\000\200?\000\000\000@\000\000@@\000\000\200@\000\000\240@"sv;

// ScalarF16
constexpr std::string_view kScalarF16 =
    "\223NUMPY\001\000v\000{'descr': '<f2', 'fortran_order': False, 'shape': (), }       "
    "                                                       \012\000>"sv;

// Range3I64
constexpr std::string_view kRange3I64 =
    "\223NUMPY\001\000v\000{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }     "
    "                                                       \012\000\000\000\000\000\000\000"
    "\000\001\000\000\000\000\000\000\000\002\000\000\000\000\000\000\000"sv;

// Empty04I32
constexpr std::string_view kEmpty04I32 =
    "\223NUMPY\001\000v\000{'descr': '<i4', 'fortran_order': False, 'shape': (0, 4), }   "
    "                                                       \012"sv;

// PairU16
constexpr std::string_view kPairU16 =
    "\223NUMPY\001\000v\000{'descr': '<u2', 'fortran_order': False, 'shape': (2,), }     "
    "                                                       \012\001\000\377\377"sv;

constexpr NpyType kAllTypes[] = {NpyType::f32, NpyType::f16, NpyType::u16, NpyType::i32,
                                 NpyType::i64};

// The .npy bytes of `header` taken as-is (no padding added) behind a version `major`.0 prefix.
std::string npy_bytes(int major, std::string_view header, std::string_view data = {}) {
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  const std::size_t len_size = major == 1 ? 2 : 4;
  for (std::size_t i = 0; i < len_size; ++i) {
    out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  }
  out += header;
  out += data;
  return out;
}

// A version 1.0 file with `dict` as its header and `data` behind it.
std::string v1(std::string_view dict, std::string_view data = {}) {
  return npy_bytes(1, std::string(dict) + "\n", data);
}

std::string f32_bytes(const std::vector<float>& values) {
  std::string out(values.size() * sizeof(float), '\0');
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

// np.arange(6, dtype=np.float32), as raw little-endian bytes.
std::string arange6() { return f32_bytes({0, 1, 2, 3, 4, 5}); }

constexpr std::string_view kArangeDict =
    "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";

// A pattern that differs per byte, so swapped or shifted bytes show.
std::string pattern(std::size_t size) {
  std::string out(size, '\0');
  for (std::size_t i = 0; i < size; ++i) out[i] = static_cast<char>((i * 37 + 11) & 0xff);
  return out;
}

NpyArray make_array(NpyType type, std::vector<std::int64_t> shape) {
  NpyArray array{.type = type, .shape = std::move(shape), .data = {}};
  array.data = pattern(static_cast<std::size_t>(array.elements()) * npy_itemsize(type));
  return array;
}

std::string describe(const NpyArray& a) {
  return fmt::format("{} ({}) {} bytes", moejit::tools::npy_type_name(a.type),
                     fmt::join(a.shape, ", "), a.data.size());
}

void check_same(const NpyArray& got, const NpyArray& want) {
  INFO("got " << describe(got) << ", want " << describe(want));
  CHECK(got.type == want.type);
  CHECK(got.shape == want.shape);
  CHECK(got.data == want.data);
}

// The header length field plus its prefix: where the data starts.
std::size_t data_offset(std::string_view bytes) {
  const auto byte = [&](std::size_t i) {
    return static_cast<std::size_t>(static_cast<unsigned char>(bytes[i]));
  };
  if (bytes[6] == 1) return 10 + (byte(8) | byte(9) << 8);
  return 12 + (byte(8) | byte(9) << 8 | byte(10) << 16 | byte(11) << 24);
}

// Parses `bytes`, requiring an input error that names the file and tensor and whose message
// contains `needle`.
void require_rejected(std::string_view bytes, std::string_view needle) {
  CAPTURE(needle);
  try {
    (void)parse_npy(bytes, "bad.npy", "w_up");
  } catch (const moejit::Error& e) {
    const std::string what = e.what();
    CAPTURE(what);
    CHECK(e.kind() == moejit::ErrorKind::input);
    CHECK(e.fields().file == "bad.npy");
    CHECK(e.fields().pointer == "w_up");
    CHECK_THAT(what, Catch::Matchers::Contains(std::string(needle)));
    CHECK_THAT(what, Catch::Matchers::StartsWith("bad.npy: w_up: "));
    return;
  }
  FAIL("parse_npy accepted: " << bytes);
}

// A fresh directory under the system temp dir, removed again at scope exit.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::random_device random;
    path = std::filesystem::temp_directory_path() /
           fmt::format("moejit-npy-test-{:08x}{:08x}", random(), random());
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

}  // namespace

// ---- Types -----------------------------------------------------------------------------------

TEST_CASE("npy type tables", "[npy]") {
  using moejit::DType;
  using moejit::tools::npy_descr;
  using moejit::tools::npy_type_for;
  using moejit::tools::npy_type_name;
  CHECK(npy_descr(NpyType::f32) == "<f4");
  CHECK(npy_descr(NpyType::f16) == "<f2");
  CHECK(npy_descr(NpyType::u16) == "<u2");
  CHECK(npy_descr(NpyType::i32) == "<i4");
  CHECK(npy_descr(NpyType::i64) == "<i8");
  CHECK(npy_type_name(NpyType::f32) == "float32");
  CHECK(npy_type_name(NpyType::f16) == "float16");
  CHECK(npy_type_name(NpyType::u16) == "uint16");
  CHECK(npy_type_name(NpyType::i32) == "int32");
  CHECK(npy_type_name(NpyType::i64) == "int64");
  for (NpyType t : kAllTypes) {
    // The descr's digit is the item size.
    CHECK(npy_itemsize(t) == static_cast<std::size_t>(npy_descr(t)[2] - '0'));
  }
  CHECK(npy_type_for(DType::f32) == NpyType::f32);
  CHECK(npy_type_for(DType::f16) == NpyType::f16);
  CHECK(npy_type_for(DType::bf16) == NpyType::u16);
  CHECK(npy_type_for(DType::i32) == NpyType::i32);
  CHECK(npy_type_for(DType::i64) == NpyType::i64);
}

TEST_CASE("npy elements", "[npy]") {
  CHECK(NpyArray{.type = NpyType::f32, .shape = {}, .data = {}}.elements() == 1);
  CHECK(NpyArray{.type = NpyType::f32, .shape = {0, 4}, .data = {}}.elements() == 0);
  CHECK(NpyArray{.type = NpyType::f32, .shape = {2, 3}, .data = {}}.elements() == 6);
  NpyArray bad{.type = NpyType::f32, .shape = {2, -3}, .data = {}};
  CHECK_THROWS_AS(bad.elements(), moejit::Error);
}

// ---- Round trips -------------------------------------------------------------------------------

TEST_CASE("npy round trip for every type and shape", "[npy]") {
  const std::vector<std::vector<std::int64_t>> shapes = {{}, {0}, {7}, {3, 5}, {2, 0, 3}};
  for (NpyType type : kAllTypes) {
    for (const auto& shape : shapes) {
      const NpyArray array = make_array(type, shape);
      INFO(describe(array));
      const std::string bytes = format_npy(array);
      CHECK(bytes.substr(0, 8) == "\x93NUMPY\x01\x00"sv);
      const std::size_t offset = data_offset(bytes);
      CHECK(offset % 64 == 0);
      CHECK(bytes[offset - 1] == '\n');
      CHECK(bytes.size() == offset + array.data.size());
      check_same(parse_npy(bytes, "rt.npy"), array);
    }
  }
}

TEST_CASE("npy writes version 2.0 when the header outgrows 65535 bytes", "[npy]") {
  // 22000 dimensions of 1 need a ~66000-byte header; the array still holds one element.
  const NpyArray array = make_array(NpyType::i32, std::vector<std::int64_t>(22000, 1));
  const std::string bytes = format_npy(array);
  CHECK(bytes.substr(0, 8) == "\x93NUMPY\x02\x00"sv);
  const std::size_t offset = data_offset(bytes);
  CHECK(offset > 65535);
  CHECK(offset % 64 == 0);
  CHECK(bytes.size() == offset + 4);
  check_same(parse_npy(bytes, "big.npy"), array);
}

TEST_CASE("npy format refuses data that does not match the shape", "[npy]") {
  NpyArray array = make_array(NpyType::f16, {3});
  array.data.pop_back();
  try {
    (void)format_npy(array);
    FAIL("format_npy accepted 5 bytes for 3 float16");
  } catch (const moejit::Error& e) {
    CHECK(e.kind() == moejit::ErrorKind::internal);
    CHECK_THAT(std::string(e.what()), Catch::Matchers::Contains("5 data bytes"));
  }
}

// ---- NumPy compatibility -------------------------------------------------------------------

TEST_CASE("npy reads what NumPy writes, and writes it byte for byte", "[npy]") {
  const NpyArray arange{.type = NpyType::f32, .shape = {2, 3}, .data = arange6()};
  SECTION("np.save, version 1.0") {
    check_same(parse_npy(kArange23V1, "a.npy"), arange);
    CHECK(format_npy(arange) == kArange23V1);
  }
  SECTION("version 2.0") { check_same(parse_npy(kArange23V2, "a.npy"), arange); }
  SECTION("version 3.0") { check_same(parse_npy(kArange23V3, "a.npy"), arange); }
  SECTION("NumPy 1.14 to 1.22: 64-byte alignment without spare spaces") {
    const std::string bytes = v1(std::string(kArangeDict) + std::string(58, ' '), arange6());
    CHECK(bytes.substr(8, 2) == "v\0"sv);  // 118 header bytes: data at 128
    check_same(parse_npy(bytes, "a.npy"), arange);
  }
  SECTION("NumPy before 1.14: 16-byte alignment") {
    const std::string bytes = v1(std::string(kArangeDict) + std::string(10, ' '), arange6());
    CHECK(bytes.substr(8, 2) == "F\0"sv);  // 70 header bytes: data at 80
    check_same(parse_npy(bytes, "a.npy"), arange);
  }
  SECTION("other types and shapes") {
    for (std::string_view fixture : {kScalarF16, kRange3I64, kEmpty04I32, kPairU16}) {
      const NpyArray array = parse_npy(fixture, "f.npy");
      INFO(describe(array));
      CHECK(format_npy(array) == fixture);
    }
    const NpyArray scalar = parse_npy(kScalarF16, "s.npy");
    CHECK(scalar.type == NpyType::f16);
    CHECK(scalar.shape.empty());
    CHECK(scalar.data == "\x00\x3e"sv);  // 1.5 in float16
    const NpyArray empty = parse_npy(kEmpty04I32, "e.npy");
    CHECK(empty.type == NpyType::i32);
    CHECK(empty.shape == std::vector<std::int64_t>{0, 4});
    CHECK(empty.data.empty());
    CHECK(parse_npy(kPairU16, "u.npy").data == "\x01\x00\xff\xff"sv);
    CHECK(parse_npy(kRange3I64, "i.npy").shape == std::vector<std::int64_t>{3});
  }
}

// ---- Header variants ---------------------------------------------------------------------------

TEST_CASE("npy accepts every spelling of the header dict", "[npy]") {
  const NpyArray arange{.type = NpyType::f32, .shape = {2, 3}, .data = arange6()};
  const std::vector<std::string_view> dicts = {
      "{'descr':'<f4','fortran_order':False,'shape':(2,3)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}",
      "  {  'descr' :  '<f4' ,\n\t'fortran_order' : False ,  'shape' : ( 2 , 3 , ) , }  \n  ",
      "{'shape': (2, 3), 'descr': '<f4', 'fortran_order': False, }",
      "{'fortran_order': False, 'shape': (2, 3), 'descr': '<f4'}",
      R"({"descr": "<f4", "fortran_order": False, "shape": (2, 3), })",
      R"({'descr': "<f4", "fortran_order": False, 'shape': (2, 3),})",
  };
  for (std::string_view dict : dicts) {
    INFO(dict);
    check_same(parse_npy(npy_bytes(1, dict, arange6()), "v.npy"), arange);
    check_same(parse_npy(npy_bytes(2, dict, arange6()), "v.npy"), arange);
    check_same(parse_npy(npy_bytes(3, dict, arange6()), "v.npy"), arange);
  }
}

TEST_CASE("npy accepts scalar, one-axis and empty shapes", "[npy]") {
  const auto parse = [](std::string_view shape, std::string_view data) {
    return parse_npy(
        v1(fmt::format("{{'descr': '<f4', 'fortran_order': False, 'shape': {}, }}", shape), data),
        "s.npy");
  };
  CHECK(parse("()", f32_bytes({1})).shape.empty());
  CHECK(parse("( )", f32_bytes({1})).shape.empty());
  CHECK(parse("(5,)", f32_bytes({1, 2, 3, 4, 5})).shape == std::vector<std::int64_t>{5});
  CHECK(parse("(5, )", f32_bytes({1, 2, 3, 4, 5})).shape == std::vector<std::int64_t>{5});
  CHECK(parse("(0, 4)", "").shape == std::vector<std::int64_t>{0, 4});
  CHECK(parse("(0,)", "").shape == std::vector<std::int64_t>{0});
}

TEST_CASE("npy takes '|' and '=' as little-endian", "[npy]") {
  const auto type_of = [](std::string_view descr, std::string_view data) {
    return parse_npy(
               v1(fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': (1,), }}", descr),
                  data),
               "d.npy")
        .type;
  };
  CHECK(type_of("|u2", "ab") == NpyType::u16);
  CHECK(type_of("=i4", "abcd") == NpyType::i32);
  CHECK(type_of("<i8", "abcdefgh") == NpyType::i64);
  CHECK(type_of("<f2", "ab") == NpyType::f16);
}

// ---- Malformed input -------------------------------------------------------------------------

TEST_CASE("npy rejects files that are not .npy", "[npy]") {
  std::string bad_magic = std::string(kArange23V1);
  bad_magic[5] = 'Z';
  require_rejected(bad_magic, "bad magic");
  require_rejected("PK\x03\x04 an .npz is a zip", "bad magic");
  require_rejected("", "truncated");
  require_rejected("\x93NUMPY\x01"sv, "truncated");
  require_rejected("\x93NUMPY\x01\x00\x10"sv, "truncated");
  require_rejected("\x93NUMPY\x02\x00\x10\x00\x00"sv, "truncated");
}

TEST_CASE("npy rejects unsupported versions", "[npy]") {
  std::string bytes = std::string(kArange23V1);
  bytes[6] = '\x04';
  require_rejected(bytes, "version");
  require_rejected(bytes, "4.0");
  bytes[6] = '\x01';
  bytes[7] = '\x01';
  require_rejected(bytes, "1.1");
  bytes[6] = '\x00';
  bytes[7] = '\x00';
  require_rejected(bytes, "0.0");
}

TEST_CASE("npy rejects a truncated header", "[npy]") {
  require_rejected(kArange23V1.substr(0, 50), "truncated .npy header");
  require_rejected(kArange23V2.substr(0, 100), "truncated .npy header");
  require_rejected(npy_bytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,"),
                   "end of the header");
}

TEST_CASE("npy rejects data of the wrong length", "[npy]") {
  require_rejected(kArange23V1.substr(0, kArange23V1.size() - 1), "truncated .npy data");
  require_rejected(kArange23V1.substr(0, kArange23V1.size() - 1), "23 data bytes");
  require_rejected(kArange23V1.substr(0, kArange23V1.size() - 1), "24 bytes for float32 (2, 3)");
  require_rejected(kArange23V1.substr(0, 128), "truncated");
  require_rejected(std::string(kArange23V1) + "x", "extra bytes");
  require_rejected(v1("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4), }", "x"),
                   "extra bytes");
}

TEST_CASE("npy rejects what is not C-order little-endian f32/f16/u16/i32/i64", "[npy]") {
  const auto with_descr = [](std::string_view descr) {
    return v1(fmt::format("{{'descr': {}, 'fortran_order': False, 'shape': (2, 3), }}", descr),
              arange6());
  };
  require_rejected(v1("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", arange6()),
                   "not C order");
  require_rejected(with_descr("'>f4'"), "big-endian");
  require_rejected(with_descr("'>i8'"), "big-endian");
  require_rejected(with_descr("'<f8'"), "unsupported dtype");
  require_rejected(with_descr("'<f8'"), "found \"<f8\"");
  require_rejected(with_descr("'|b1'"), "unsupported dtype");
  require_rejected(with_descr("'|O'"), "unsupported dtype");
  require_rejected(with_descr("'<u4'"), "unsupported dtype");
  require_rejected(with_descr("'f4'"), "unsupported dtype");
  require_rejected(with_descr("''"), "unsupported dtype");
  require_rejected(with_descr("[('a', '<f4')]"), "structured");
  require_rejected(with_descr("4"), "'descr' must be a quoted string");
}

TEST_CASE("npy rejects malformed header dicts", "[npy]") {
  const auto header = [](std::string_view dict) { return v1(dict, arange6()); };
  require_rejected(header("{'descr': '<f4', 'fortran_order': False, }"), "missing key 'shape'");
  require_rejected(header("{'fortran_order': False, 'shape': (2, 3), }"), "missing key 'descr'");
  require_rejected(header("{'descr': '<f4', 'shape': (2, 3), }"), "missing key 'fortran_order'");
  require_rejected(header("{}"), "missing key");
  require_rejected(header(""), "expected '{'");
  require_rejected(header("descr: <f4"), "expected '{'");
  require_rejected(header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 1}"),
                   "unknown key");
  require_rejected(
      header("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}"),
      "repeated key");
  require_rejected(header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } x"),
                   "trailing garbage");
  require_rejected(header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }}"),
                   "trailing garbage");
  require_rejected(header("{'descr': '<f4' 'fortran_order': False, 'shape': (2, 3)}"),
                   "expected ',' or '}'");
  require_rejected(header("{'descr': '<f4',, 'fortran_order': False, 'shape': (2, 3)}"),
                   "expected a quoted key");
  require_rejected(header("{descr: '<f4', 'fortran_order': False, 'shape': (2, 3)}"),
                   "expected a quoted key");
  require_rejected(header("{'descr' '<f4', 'fortran_order': False, 'shape': (2, 3)}"),
                   "expected ':'");
  require_rejected(header("{'descr': '<f4, 'fortran_order': False, 'shape': (2, 3)}"),
                   "expected ',' or '}'");
  require_rejected(header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x"),
                   "unterminated string");
  require_rejected(header("{'descr': '<\\x66', 'fortran_order': False, 'shape': (2, 3)}"),
                   "escape");
  require_rejected(header("{'descr': '<f4', 'fortran_order': 'False', 'shape': (2, 3)}"),
                   "True or False");
  require_rejected(header("{'descr': '<f4', 'fortran_order': Falsey, 'shape': (2, 3)}"),
                   "True or False");
  require_rejected(header("{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 3)}"),
                   "True or False");
}

TEST_CASE("npy rejects malformed shapes", "[npy]") {
  const auto shape = [](std::string_view tuple) {
    return v1(fmt::format("{{'descr': '<f4', 'fortran_order': False, 'shape': {}, }}", tuple),
              arange6());
  };
  require_rejected(shape("(-1, 3)"), "negative dimension");
  require_rejected(shape("(2, -3)"), "found \"-3\"");
  require_rejected(shape("(2.0, 3)"), "not an integer");
  require_rejected(shape("(2.0, 3)"), "found \"2.0\"");
  require_rejected(shape("('2', 3)"), "not an integer");
  require_rejected(shape("(two, 3)"), "not an integer");
  require_rejected(shape("(2L, 3L)"), "not an integer");
  require_rejected(shape("(0x2, 3)"), "not an integer");
  require_rejected(shape("(02, 3)"), "not an integer");
  require_rejected(shape("(None,)"), "not an integer");
  require_rejected(shape("(,)"), "not an integer");
  require_rejected(shape("(2, 3,,)"), "not an integer");
  require_rejected(shape("(6)"), "not a tuple");
  require_rejected(shape("[2, 3]"), "must be a tuple");
  require_rejected(shape("6"), "must be a tuple");
  require_rejected(shape("(2 3)"), "expected ',' or ')'");
  require_rejected(v1("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3}", arange6()),
                   "expected ',' or ')'");
  require_rejected(shape("(2, 3"), "not an integer");
}

TEST_CASE("npy rejects shapes too large to address", "[npy]") {
  const auto shape = [](std::string_view tuple) {
    return v1(fmt::format("{{'descr': '<f4', 'fortran_order': False, 'shape': {}, }}", tuple));
  };
  require_rejected(shape("(99999999999999999999,)"), "too large");
  require_rejected(shape("(9223372036854775808,)"), "too large");
  require_rejected(shape("(4294967296, 4294967296)"), "too large");
  // int64 max elements, but times 4 bytes each it overflows.
  require_rejected(shape("(9223372036854775807,)"), "too large");
  // NumPy refuses this too: zero elements, yet the other dimensions overflow.
  require_rejected(shape("(4611686018427387904, 4611686018427387904, 0)"), "too large");
  // The largest that fits: accepted by the shape check, then refused for lack of data.
  require_rejected(shape("(2305843009213693951,)"), "truncated .npy data");
}

// ---- Files -----------------------------------------------------------------------------------

TEST_CASE("npy write_npy and read_npy round trip through a file", "[npy]") {
  TempDir dir;
  const std::filesystem::path file = dir.path / "x.npy";
  const NpyArray first = make_array(NpyType::i64, {4, 2});
  moejit::tools::write_npy(file, first);
  CHECK_FALSE(std::filesystem::exists(dir.path / "x.npy.tmp"));
  check_same(moejit::tools::read_npy(file, "x"), first);
  // Overwriting replaces the old file.
  const NpyArray second = make_array(NpyType::f16, {});
  moejit::tools::write_npy(file, second);
  check_same(moejit::tools::read_npy(file), second);
  CHECK(std::filesystem::file_size(file) == 130);
}

TEST_CASE("npy file errors", "[npy]") {
  TempDir dir;
  SECTION("writing into a missing directory is refused, naming the file asked for") {
    const std::filesystem::path file = dir.path / "missing" / "x.npy";
    try {
      moejit::tools::write_npy(file, make_array(NpyType::f32, {2}));
      FAIL("write_npy succeeded");
    } catch (const moejit::Error& e) {
      CHECK(e.kind() == moejit::ErrorKind::usage);
      CHECK(e.fields().file == file.string());
      CHECK_THAT(std::string(e.what()), !Catch::Matchers::Contains(".tmp"));
    }
    CHECK_FALSE(std::filesystem::exists(dir.path / "missing"));
  }
  SECTION("reading a missing file is bad input") {
    try {
      (void)moejit::tools::read_npy(dir.path / "nope.npy", "w");
      FAIL("read_npy succeeded");
    } catch (const moejit::Error& e) {
      CHECK(e.kind() == moejit::ErrorKind::input);
      CHECK_THAT(std::string(e.what()), Catch::Matchers::Contains("nope.npy"));
      CHECK_THAT(std::string(e.what()), Catch::Matchers::Contains("No such file"));
    }
  }
  SECTION("a malformed file names the file and the tensor") {
    const std::filesystem::path file = dir.path / "bad.npy";
    std::ofstream(file, std::ios::binary) << "\x93NUMPY\x01";
    try {
      (void)moejit::tools::read_npy(file, "w_gate");
      FAIL("read_npy accepted a truncated file");
    } catch (const moejit::Error& e) {
      CHECK(e.kind() == moejit::ErrorKind::input);
      CHECK(e.fields().file == file.string());
      CHECK(e.fields().pointer == "w_gate");
      CHECK_THAT(std::string(e.what()), Catch::Matchers::Contains("truncated"));
    }
  }
}
