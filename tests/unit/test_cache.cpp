// The cubin cache: publish/read round trips, corruption moved aside and recompiled, nothing
// partial after a failure, unsafe directories refused, allocation-free lookups, upkeep, bundles,
// and many real processes warming the same specs at once.
#include <moejit/error.hpp>
#include <moejit/options.hpp>
#include <moejit/spec.hpp>
#include <moejit/warmup.hpp>

#include "cache/cache.hpp"
#include "cache/fs.hpp"
#include "cache/warmup.hpp"
#include "tests/alloc_counter.hpp"
#include "tools/cli.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <new>
#include <regex>
#include <thread>

#include <dirent.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

using namespace moejit;
using namespace moejit::detail;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "moejit-test-XXXXXX").string();
    path = ::mkdtemp(tmpl.data());
  }
  ~TempDir() { remove_quietly(path); }
};

Options options_at(const fs::path& dir) {
  auto o = Options::from_environment();
  o.cache_dir = dir / "cache";
  o.disk_cache = true;
  return o;
}

Contract small_contract(int d = 8, const char* kind = "silu") {
  return contracts(*parse_spec(fmt::format(R"({{"op": "activation", "kind": "{}", "d": {}}})", kind, d), "t.json").ops[0],
                   "sm_90a").front();
}

fs::path entry_dir(const Cache& cache, const Key& key) {
  return cache.root() / key.hex().substr(0, 2) / key.hex();
}

std::size_t count_in(const fs::path& dir) {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

void overwrite(const fs::path& file, const std::string& data) { std::ofstream(file, std::ios::binary | std::ios::trunc) << data; }

std::string read_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_CASE("a directory lists its names sorted, with the types the listing gives, as often as asked", "[cache]") {
  TempDir t;
  overwrite(t.path / "b.file", "x");
  fs::create_directory(t.path / "a.dir");
  fs::create_symlink("b.file", t.path / "c.link");
  const Dir dir = open_directory(t.path);
  for (int pass = 0; pass < 2; ++pass) {  // typed_names reads from the descriptor's start each time
    const auto listed = dir.typed_names();
    REQUIRE(listed.size() == 3);
    CHECK(listed[0].name == "a.dir");
    CHECK(listed[1].name == "b.file");
    CHECK(listed[2].name == "c.link");
    // A file system that does not say leaves DT_UNKNOWN, which callers stat.
    CHECK((listed[0].type == DT_DIR || listed[0].type == DT_UNKNOWN));
    CHECK((listed[1].type == DT_REG || listed[1].type == DT_UNKNOWN));
    CHECK((listed[2].type == DT_LNK || listed[2].type == DT_UNKNOWN));
  }
  CHECK(dir.names() == std::vector<std::string>{"a.dir", "b.file", "c.link"});
  CHECK(open_directory(t.path / "a.dir").names().empty());
}

TEST_CASE("entries are compiled once, then read from disk, then from memory", "[cache]") {
  TempDir tmp;
  const auto options = options_at(tmp.path);
  Compiler compiler(options.cuda_home);
  const auto c = small_contract();
  Key key;
  {
    Cache cache(options, compiler);
    auto r = cache.get(c);
    CHECK(r.source == Source::compiled);
    key = r.entry->manifest.key;
    CHECK(cache.get(c).source == Source::memory);
    const auto dir = entry_dir(cache, key);
    CHECK(fs::exists(dir / "kernel.cubin"));
    CHECK(fs::exists(dir / "manifest.json"));
    CHECK(count_in(cache.root() / "tmp") == 0);
  }
  Cache fresh(options, compiler);
  auto r = fresh.get(c);
  CHECK(r.source == Source::disk);
  CHECK(r.entry->manifest.inputs.contract_text == c.text());
  CHECK(r.entry->manifest.kernels.at(0).resources.registers > 0);
}

TEST_CASE("a cubin read from disk is its file's bytes, mapped, and stays whole when the entry is removed", "[cache]") {
  TempDir tmp;
  const auto options = options_at(tmp.path);
  Compiler compiler(options.cuda_home);
  const auto c = small_contract();
  std::string compiled;
  fs::path dir;
  {
    Cache cache(options, compiler);
    const auto r = cache.get(c);
    compiled = std::string(r.entry->cubin.view());
    dir = entry_dir(cache, r.entry->manifest.key);
  }
  Bytes held;
  {
    Cache fresh(options, compiler);
    const auto r = fresh.get(c);
    REQUIRE(r.source == Source::disk);
    CHECK(r.entry->cubin == compiled);
    CHECK(read_file(dir / "kernel.cubin") == compiled);
    held = r.entry->cubin;  // shares the mapping past the cache
  }
  // As prune and verify remove an entry: the directory renamed away, then its files unlinked.
  fs::rename(dir, tmp.path / "gone");
  fs::remove_all(tmp.path / "gone");
  CHECK(held == compiled);
  // Bytes of a string of their own.
  const Bytes owned(std::string("abc"));
  const Bytes copy = owned;
  CHECK(copy.view() == "abc");
  CHECK(copy.data() == owned.data());
  CHECK(Bytes().empty());
}

TEST_CASE("corrupt or truncated entries are moved aside and recompiled, never loaded", "[cache]") {
  TempDir tmp;
  const auto options = options_at(tmp.path);
  Compiler compiler(options.cuda_home);
  const auto c = small_contract();
  Key key;
  fs::path dir;
  {
    Cache cache(options, compiler);
    key = cache.get(c).entry->manifest.key;
    dir = entry_dir(cache, key);
  }
  const std::string good = read_file(dir / "kernel.cubin");
  const std::string manifest = read_file(dir / "manifest.json");

  auto damage = [&](const std::string& what) {
    if (what == "flipped byte") {
      std::string bad = good;
      bad[bad.size() / 2] = static_cast<char>(bad[bad.size() / 2] ^ 0x40);
      overwrite(dir / "kernel.cubin", bad);
    } else if (what == "truncated cubin") {
      overwrite(dir / "kernel.cubin", good.substr(0, good.size() / 3));
    } else if (what == "empty cubin") {
      overwrite(dir / "kernel.cubin", "");
    } else if (what == "truncated manifest") {
      overwrite(dir / "manifest.json", manifest.substr(0, manifest.size() / 2));
    } else if (what == "missing cubin") {
      fs::remove(dir / "kernel.cubin");
    } else if (what == "edited contract") {
      std::string m = manifest;
      m.replace(m.find("d 8"), 3, "d 9");
      overwrite(dir / "manifest.json", m);
    }
  };
  for (const char* what : {"flipped byte", "truncated cubin", "empty cubin", "truncated manifest", "missing cubin", "edited contract"}) {
    SECTION(what) {
      damage(what);
      Cache cache(options, compiler);
      CHECK(cache.verify(false).size() == 1);
      auto r = cache.get(c);
      CHECK(r.source == Source::compiled);
      CHECK(r.entry->cubin == good);
      CHECK(count_in(cache.root() / "quarantine") == 1);
      CHECK(cache.verify(false).empty());
    }
  }
}

TEST_CASE("a failed compile leaves nothing in the cache", "[cache]") {
  TempDir tmp;
  const auto options = options_at(tmp.path);
  Compiler compiler(options.cuda_home);
  Cache cache(options, compiler);
  Contract bad("activation", "sm_90a", "activation.cuh");
  bad.source = "#include \"activation.cuh\"\nstatic_assert(false, \"nope\");\n";
  bad.kernels = {{"narrow", "moejit::activation_kernel<int>"}};
  CHECK_THROWS_AS(cache.get(bad), Error);
  CHECK(cache.list().empty());
  CHECK(count_in(cache.root() / "tmp") == 0);
  CHECK(cache.find(cache.key_of(bad)) == nullptr);
}

TEST_CASE("staging directories of a process that died are never read, and are pruned when stale", "[cache]") {
  TempDir tmp;
  const auto options = options_at(tmp.path);
  Compiler compiler(options.cuda_home);
  Cache cache(options, compiler);
  const auto c = small_contract();
  const auto key = cache.key_of(c);
  const auto stage = cache.root() / "tmp" / (key.hex() + ".12345.deadbeef");
  fs::create_directories(stage);
  overwrite(stage / "kernel.cubin", "half");
  CHECK(cache.get(c).source == Source::compiled);
  fs::last_write_time(stage, fs::file_time_type::clock::now() - std::chrono::hours(2));
  cache.prune(std::uint64_t{1} << 40);
  CHECK_FALSE(fs::exists(stage));
  CHECK(cache.list().size() == 1);
}

TEST_CASE("warmup, verify and prune reclaim what writers that died left in tmp/, never a live writer's stage", "[cache]") {
  TempDir tmp;
  const auto options = options_at(tmp.path);
  Compiler compiler(options.cuda_home);
  Cache cache(options, compiler);
  const auto key_a = cache.key_of(small_contract(8)), key_b = cache.key_of(small_contract(16));
  const auto key_c = cache.key_of(small_contract(24));
  // A writer of this machine that has exited: a child, reaped.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) ::_exit(0);
  REQUIRE(::waitpid(child, nullptr, 0) == child);
  const auto here = host_tag();
  auto plant = [&](const std::string& name) {
    const auto dir = cache.root() / "tmp" / name;
    fs::create_directories(dir);
    overwrite(dir / "kernel.cubin", "half");
    return dir;
  };
  const auto dead = plant(fmt::format("{}.{}.{}.deadbeefdeadbeef", key_a.hex(), here, child));
  const auto dead_prune = plant(fmt::format("{}.prune.{}.{}.deadbeefdeadbeef", key_b.hex(), here, child));
  const auto live = plant(fmt::format("{}.{}.{}.0123456789abcdef", key_b.hex(), here, ::getpid()));
  // Its pid is gone here, but its key's lock is held: a writer in another pid namespace.
  const auto locked = plant(fmt::format("{}.{}.{}.0123456789abcdef", key_c.hex(), here, child));
  const FileLock held(cache.root() / "locks" / (key_c.hex() + ".lock"));
  // A writer on another machine sharing the cache: only age says it is gone.
  const auto remote = plant(fmt::format("{}.some-other-host.{}.0123456789abcdef", key_a.hex(), child));

  SECTION("warmup") {
    const std::vector<WarmupJob> jobs = {{"t", small_contract(8)}};
    CHECK(warmup(cache, jobs, 1).at(0).error.empty());
  }
  SECTION("verify") { CHECK(cache.verify(false).empty()); }
  SECTION("prune") { cache.prune(std::uint64_t{1} << 40); }
  CHECK_FALSE(fs::exists(dead));
  CHECK_FALSE(fs::exists(dead_prune));
  CHECK(fs::exists(live / "kernel.cubin"));
  CHECK(fs::exists(locked / "kernel.cubin"));
  CHECK(fs::exists(remote / "kernel.cubin"));

  // An hour on, the other machine's stage is stale too; a held lock still keeps one.
  for (const auto& dir : {remote, locked}) fs::last_write_time(dir, fs::file_time_type::clock::now() - std::chrono::hours(2));
  CHECK(cache.reclaim_staging() == 1);
  CHECK_FALSE(fs::exists(remote));
  CHECK(fs::exists(locked));
  CHECK(fs::exists(live));
  CHECK(cache.verify(false).empty());
}

TEST_CASE("an output file is written whole or not at all, and only where it can end as a regular file", "[cache]") {
  TempDir tmp;
  const auto dir = tmp.path / "out";
  fs::create_directories(dir / "sub");
  ::mkfifo((dir / "fifo").c_str(), 0600);
  overwrite(dir / "target", "old");
  fs::create_symlink(dir / "target", dir / "link");
  auto refused = [&](const fs::path& file, const std::string& what) {
    INFO(file.string());
    try {
      write_output_file(file, "data", "--json");
      FAIL("written");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::usage);
      CHECK(e.fields().file == file.string());
      CHECK(e.fields().pointer == "--json");
      CHECK_THAT(std::string(e.what()), Catch::Matchers::Contains(what));
    }
  };
  refused("", "an empty path");
  refused(dir / "sub", "found a directory");
  refused(dir / "fifo", "found a FIFO");
  refused("/dev/null", "found a character device");
  refused(dir / "link", "found a symbolic link");
  refused(dir / "missing" / "x", "directory does not exist");
  refused(dir / "target" / "x", "is not a directory; found " + (dir / "target").string());
  CHECK(fs::is_symlink(dir / "link"));
  CHECK(read_file(dir / "target") == "old");

  write_output_file(dir / "target", "new");
  CHECK(read_file(dir / "target") == "new");
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++entries;
  CHECK(entries == 4);  // sub, fifo, target, link: no staged file left

  SECTION("the output directory of run and compile") {
    CHECK_NOTHROW(make_output_dir(dir / "new" / "deeper", "--out-dir"));
    CHECK(fs::is_directory(dir / "new" / "deeper"));
    CHECK_NOTHROW(make_output_dir(dir / "sub", "--out-dir"));
    for (const auto& bad : {dir / "target", dir / "target" / "x", fs::path()}) {
      INFO(bad.string());
      try {
        make_output_dir(bad, "--out-dir");
        FAIL("accepted");
      } catch (const Error& e) {
        CHECK(e.kind() == ErrorKind::usage);
        CHECK(e.fields().pointer == "--out-dir");
      }
    }
  }
}

TEST_CASE("a cache directory that is not private is refused", "[cache]") {
  TempDir tmp;
  const auto options = options_at(tmp.path);
  Compiler compiler(options.cuda_home);
  fs::create_directories(options.cache_dir);
  ::chmod(options.cache_dir.c_str(), 0777);
  try {
    Cache cache(options, compiler);
    FAIL("a world-writable cache directory was accepted");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::cache);
    CHECK(std::string(e.what()).find("world-writable") != std::string::npos);
  }
  ::chmod(options.cache_dir.c_str(), 0750);
  CHECK_NOTHROW(Cache(options, compiler));
  if (::geteuid() == 0) {  // only root can give a directory away
    REQUIRE(::chown(options.cache_dir.c_str(), 65534, 65534) == 0);
    try {
      Cache cache(options, compiler);
      FAIL("a cache directory owned by another user was accepted");
    } catch (const Error& e) {
      CHECK(std::string(e.what()).find("owned by another user") != std::string::npos);
    }
  } else {
    WARN("not root: the other-owner case is not exercised");
  }
}

namespace {

// A disk cache holding the entry of small_contract(8), closed again.
struct Warmed {
  TempDir tmp;
  Options options = options_at(tmp.path);
  Compiler compiler{options.cuda_home};
  Key key;
  fs::path root, shard, entry;  // v<schema>/, the entry's shard and directory

  Warmed() {
    Cache cache(options, compiler);
    key = cache.get(small_contract()).entry->manifest.key;
    root = cache.root();
    entry = entry_dir(cache, key);
    shard = entry.parent_path();
  }
};

// The message a cache at `options` is refused with (ErrorKind::cache, bad input: exit 2).
std::string refusal(const Options& options, const Compiler& compiler) {
  try {
    Cache cache(options, compiler);
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::cache);
    CHECK(e.is_bad_input());
    return e.what();
  }
  FAIL("the cache was accepted");
  return {};
}

// Replaces `dir` with a symbolic link to `target`.
void swap_for_link(const fs::path& dir, const fs::path& target) {
  fs::rename(dir, dir.string() + ".moved");
  fs::create_directory_symlink(target, dir);
}

}  // namespace

TEST_CASE("a link in place of a directory of the tree refuses the cache; nothing outside it is touched", "[cache][hostile]") {
  Warmed w;
  const auto outside = w.tmp.path / "outside";
  fs::create_directories(outside);
  overwrite(outside / "precious", "keep");
  for (const auto& dir : {w.root / "quarantine", w.root / "tmp", w.root / "locks", w.shard, w.root}) {
    SECTION(dir.filename().string()) {
      swap_for_link(dir, outside);
      CHECK_THAT(refusal(w.options, w.compiler), Catch::Matchers::Contains("found a symbolic link"));
    }
  }
  CHECK(read_file(outside / "precious") == "keep");
  CHECK(count_in(outside) == 1);
}

TEST_CASE("inside an open cache no link is followed: bad entries are moved aside, bad shards and lock files refused", "[cache][hostile]") {
  Warmed w;
  Cache cache(w.options, w.compiler);  // opened first: each case is planted while it runs
  const auto outside = w.tmp.path / "outside";
  fs::create_directories(outside);
  auto recompiled_once_moved_aside = [&] {
    CHECK(cache.get(small_contract()).source == Source::compiled);
    CHECK(count_in(w.root / "quarantine") == 1);
    CHECK(cache.verify(false).empty());
  };
  SECTION("a shard swapped for a link") {
    swap_for_link(w.shard, outside);
    CHECK_THROWS_AS(cache.get(small_contract()), Error);
    CHECK(count_in(outside) == 0);
  }
  SECTION("a dangling link in place of a lock file is never created through") {
    fs::remove_all(w.entry);
    fs::remove(w.root / "locks" / (w.key.hex() + ".lock"));
    fs::create_symlink(outside / "created", w.root / "locks" / (w.key.hex() + ".lock"));
    try {
      cache.get(small_contract());
      FAIL("locked through a link");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::cache);
      CHECK_THAT(std::string(e.what()), Catch::Matchers::Contains("found a symbolic link"));
    }
    CHECK_FALSE(fs::exists(outside / "created"));
  }
  SECTION("an entry that is a link to a good entry elsewhere") {
    fs::rename(w.entry, outside / "entry");
    fs::create_directory_symlink(outside / "entry", w.entry);
    CHECK(cache.verify(false).size() == 1);
    recompiled_once_moved_aside();
    CHECK(fs::is_symlink(fs::directory_iterator(w.root / "quarantine")->path()));  // the link moved, not followed
    CHECK(count_in(outside / "entry") == 2);
  }
  SECTION("a cubin that is a link to /dev/zero is never read") {
    fs::remove(w.entry / "kernel.cubin");
    fs::create_symlink("/dev/zero", w.entry / "kernel.cubin");
    CHECK_THAT(cache.verify(false).at(0).problem, Catch::Matchers::Contains("kernel.cubin is a symbolic link"));
    recompiled_once_moved_aside();
  }
  SECTION("a FIFO in place of the manifest is never opened for reading") {
    fs::remove(w.entry / "manifest.json");
    REQUIRE(::mkfifo((w.entry / "manifest.json").c_str(), 0600) == 0);
    CHECK(cache.list().at(0).manifest == std::nullopt);
    CHECK_THAT(cache.verify(false).at(0).problem, Catch::Matchers::Contains("manifest.json is a FIFO"));
    recompiled_once_moved_aside();
  }
  SECTION("a file more in the entry") {
    overwrite(w.entry / "extra", "x");
    CHECK_THAT(cache.verify(false).at(0).problem, Catch::Matchers::Contains("the entry holds extra, kernel.cubin, manifest.json"));
    recompiled_once_moved_aside();
  }
}

TEST_CASE("every byte of the manifest is checked: a changed kernel table, date, time or spacing is a bad entry", "[cache][hostile]") {
  Warmed w;
  const std::string manifest = read_file(w.entry / "manifest.json");
  auto edited = [&](const std::string& pattern, const std::string& with) {
    const auto out = std::regex_replace(manifest, std::regex(pattern), with, std::regex_constants::format_first_only);
    REQUIRE(out != manifest);
    return out;
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"lowered name", edited("activation_kernelI", "activation_kernelJ")},
      {"registers", edited(R"("registers": (\d))", R"("registers": 9$1)")},
      {"created", edited(R"("created": "[^"]*")", R"("created": "2000-01-01T00:00:00Z")")},
      {"compile seconds", edited(R"("compile_seconds": [0-9.e-]+)", R"("compile_seconds": 1234)")},
      {"no checksum", edited(R"(\s*"manifest_xxh3_128": "[0-9a-f]+",)", "")},
      {"spacing", edited(R"("arch": )", R"("arch":  )")},
      {"a second checksum field", edited(R"("arch": )", R"("manifest_xxh3_128": "0", "arch": )")},
  };
  for (const auto& [what, text] : cases) {
    SECTION(what) {
      overwrite(w.entry / "manifest.json", text);
      Cache cache(w.options, w.compiler);
      const auto bad = cache.verify(false);
      REQUIRE(bad.size() == 1);
      CHECK_THAT(bad[0].problem, Catch::Matchers::Contains("manifest"));
      CHECK(cache.get(small_contract()).source == Source::compiled);
    }
  }
}

// `text` with its self-checksum made again, as a crafted bundle's manifest would be: the parse
// behind the checksum has to refuse what it holds.
std::string resealed(std::string text) {
  const std::string field = R"("manifest_xxh3_128": ")";
  const auto digits = text.find(field) + field.size();
  text.replace(digits, 32, 32, '0');
  text.replace(digits, 32, checksum(text));
  return text;
}

TEST_CASE("a manifest whose checksum holds is still read strictly: types, duplicates, depth, encoding", "[cache][hostile]") {
  Warmed w;
  const std::string manifest = read_file(w.entry / "manifest.json");
  REQUIRE_NOTHROW(Manifest::from_json(resealed(manifest)));
  auto edited = [&](const std::string& pattern, const std::string& with) {
    const auto out = std::regex_replace(manifest, std::regex(pattern), with, std::regex_constants::format_first_only);
    REQUIRE(out != manifest);
    return resealed(out);
  };
  std::string deep = R"({"manifest_xxh3_128": "00000000000000000000000000000000", "x": )";
  deep += std::string(200000, '[') + std::string(200000, ']') + "}";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"registers as a string", edited(R"("registers": (\d+))", R"("registers": "$1")")},
      {"registers as a fraction", edited(R"("registers": (\d+))", R"("registers": $1.5)")},
      {"cubin bytes negative", edited(R"("bytes": (\d+))", R"("bytes": -$1)")},
      {"a key twice", edited(R"("arch": )", R"("arch": "sm_80", "arch": )")},
      {"no arch", edited(R"("arch": "[^"]*",)", "")},
      {"options not an array", edited(R"("options": \[)", R"("options": "x", "was": [)")},
      {"not UTF-8", edited(R"("created": ")", "\"created\": \"\xff")},
      {"trailing text", resealed(manifest + "{}")},
      {"nested 200000 levels", resealed(deep)},
  };
  for (const auto& [what, text] : cases) {
    INFO(what);
    try {
      (void)Manifest::from_json(text);
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::cache);
      CHECK_THAT(std::string(e.what()), Catch::Matchers::Contains("malformed manifest"));
    }
  }
}

TEST_CASE("every directory of the tree is held to the root's rule: this user's, not group- or world-writable", "[cache][hostile]") {
  Warmed w;
  for (const auto& dir : {w.root / "quarantine", w.root / "tmp", w.root / "locks", w.shard}) {
    SECTION("writable: " + dir.filename().string()) {
      ::chmod(dir.c_str(), 0777);
      CHECK_THAT(refusal(w.options, w.compiler), Catch::Matchers::Contains("group- or world-writable"));
    }
    SECTION("another owner: " + dir.filename().string()) {
      if (::geteuid() != 0) {
        WARN("not root: a directory cannot be given to another user here; skipped");
        continue;
      }
      REQUIRE(::chown(dir.c_str(), 65534, 65534) == 0);
      CHECK_THAT(refusal(w.options, w.compiler), Catch::Matchers::Contains("owned by another user"));
    }
  }
  SECTION("an entry's directory writable by others is moved aside") {
    ::chmod(w.entry.c_str(), 0777);
    Cache cache(w.options, w.compiler);
    CHECK_THAT(cache.verify(false).at(0).problem, Catch::Matchers::Contains("writable by group or others"));
    CHECK(cache.get(small_contract()).source == Source::compiled);
  }
  SECTION("a root reached through another user's link is refused, through one's own accepted") {
    const auto link = w.tmp.path / "link";
    fs::create_directory_symlink(w.options.cache_dir, link);
    auto through_link = w.options;
    through_link.cache_dir = link;
    CHECK_NOTHROW(Cache(through_link, w.compiler));
    if (::geteuid() != 0) {
      WARN("not root: a link cannot be given to another user here; skipped");
      return;
    }
    REQUIRE(::lchown(link.c_str(), 65534, 65534) == 0);
    CHECK_THAT(refusal(through_link, w.compiler), Catch::Matchers::Contains("another user's symbolic link"));
  }
}

TEST_CASE("the files a user names are read only when regular and within the limit", "[cache][hostile]") {
  TempDir tmp;
  REQUIRE(::mkfifo((tmp.path / "fifo").c_str(), 0600) == 0);
  overwrite(tmp.path / "big", std::string(100, 'x'));
  auto refused = [&](const fs::path& file, const std::string& what) {
    INFO(file.string());
    try {
      (void)read_input_file({.path = file, .what = "cache bundle", .max_bytes = 64});
      FAIL("read");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::input);
      CHECK(e.fields().file == file.string());
      CHECK_THAT(std::string(e.what()), Catch::Matchers::Contains(what));
    }
  };
  refused(tmp.path / "fifo", "found a FIFO");
  refused("/dev/zero", "found a character device");
  refused(tmp.path, "found a directory");
  refused(tmp.path / "big", "cache bundle too large; found 100 bytes; expected at most 64 bytes");
  refused(tmp.path / "missing", "cannot read cache bundle [stat: No such file or directory]");
  CHECK(read_input_file({.path = tmp.path / "big", .what = "cache bundle", .max_bytes = 100}).size() == 100);
}

TEST_CASE("a set of output files is published whole or not at all, never through a link", "[cache][hostile]") {
  TempDir tmp;
  const auto dir = tmp.path / "o";
  fs::create_directories(dir / "taken");
  overwrite(tmp.path / "victim", "keep");
  fs::create_symlink(tmp.path / "victim", dir / "a.npy.tmp");  // a staged name planted in advance
  SECTION("a bad target among them: nothing is written") {
    {
      OutputFiles files("--out-dir");
      files.add(dir / "a.npy", "aaaa");
      CHECK_THROWS_AS(files.add(dir / "taken", "bbbb"), Error);
    }
    CHECK_FALSE(fs::exists(dir / "a.npy"));
    CHECK(count_in(dir) == 2);  // taken, a.npy.tmp: no staged file left
  }
  SECTION("all good: all published, the planted link left as it was") {
    OutputFiles files("--out-dir");
    files.add(dir / "a.npy", "aaaa");
    files.add(dir / "b.npy", "bbbb");
    CHECK_FALSE(fs::exists(dir / "b.npy"));  // nothing before publish()
    files.publish();
    CHECK(read_file(dir / "a.npy") == "aaaa");
    CHECK(read_file(dir / "b.npy") == "bbbb");
    CHECK(count_in(dir) == 4);
  }
  CHECK(read_file(tmp.path / "victim") == "keep");
  CHECK(fs::is_symlink(dir / "a.npy.tmp"));
}

namespace {

// A bundle of (manifest, cubin) entries whose end line says `count` (default: how many there are).
std::string bundle_of(const std::vector<std::pair<std::string, std::string>>& entries, std::optional<std::size_t> count = {}) {
  std::string out = "MOEJIT-BUNDLE 1\n";
  for (const auto& [manifest, cubin] : entries) out += fmt::format("entry {} {}\n{}{}", manifest.size(), cubin.size(), manifest, cubin);
  return out + fmt::format("end {} {}\n", count.value_or(entries.size()), checksum(out));
}

}  // namespace

TEST_CASE("import verifies every entry as verify does, then publishes all of them or none", "[cache][hostile]") {
  Warmed w;
  Cache src(w.options, w.compiler);
  const auto second = entry_dir(src, src.get(small_contract(16)).entry->manifest.key);
  const std::pair<std::string, std::string> a{read_file(w.entry / "manifest.json"), read_file(w.entry / "kernel.cubin")};
  const std::pair<std::string, std::string> b{read_file(second / "manifest.json"), read_file(second / "kernel.cubin")};
  auto changed = [&](auto edit) {  // `b` with its manifest edited, its own checksum made again
    auto m = Manifest::from_json(b.first);
    edit(m);
    return std::pair<std::string, std::string>{m.to_json(), b.second};
  };
  TempDir other;
  Cache dst(options_at(other.path), w.compiler);
  const auto bundle = other.path / "bundle";
  auto refused = [&](const std::string& data, const std::string& what) {
    overwrite(bundle, data);
    try {
      dst.import_bundle(bundle);
      FAIL("imported");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::input);
      CHECK(e.fields().file == bundle.string());
      CHECK_THAT(std::string(e.what()), Catch::Matchers::Contains(what));
    }
    CHECK(dst.list().empty());  // `a`, before the bad one, was not published either
  };
  refused(bundle_of({a, changed([](Manifest& m) { m.kernels.clear(); })}), "no kernels in manifest");
  refused(bundle_of({a, changed([](Manifest& m) { m.kernels[0].lowered_name.clear(); })}), "has no name");
  refused(bundle_of({a, {b.first, ""}}), "truncated cubin: 0 bytes");
  refused(bundle_of({a, changed([](Manifest& m) { m.cubin_bytes = 0; m.cubin_checksum = checksum(""); })}), "a cubin of 0 bytes");
  refused(bundle_of({a, {"{not json", b.second}}), "malformed manifest");
  refused(bundle_of({a, b}, 3), "2 entries, but its end line says 3");
  refused(bundle_of({a, a}), "twice");
  {
    std::string huge = "MOEJIT-BUNDLE 1\nentry 18446744073709551615 5\n";
    refused(huge + fmt::format("end 1 {}\n", checksum(huge)), "runs past the end");
  }
  overwrite(bundle, bundle_of({a, b}));
  CHECK(dst.import_bundle(bundle).imported == 2);
  CHECK(dst.verify(false).empty());
}

#ifdef MOEJIT_CLI
TEST_CASE("cache ls shows what an entry holds with control characters escaped", "[cache][hostile]") {
  Warmed w;
  auto m = Manifest::from_json(read_file(w.entry / "manifest.json"));
  m.created = "\x1b[2J\xc2\x9b\x07";  // an imported bundle can carry it: the manifest's checksum still holds
  overwrite(w.entry / "manifest.json", m.to_json());
  const auto command = fmt::format("MOEJIT_CACHE_DIR='{}' '{}' cache ls 2>&1", w.options.cache_dir.string(), MOEJIT_CLI);
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(command.c_str(), "r"), ::pclose);
  REQUIRE(pipe);
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, pipe.get())) > 0;) out.append(buf, n);
  INFO(out);
  CHECK_THAT(out, Catch::Matchers::Contains("\\x1b[2J\\u009b\\x07"));
  CHECK(out.find('\x1b') == std::string::npos);
  CHECK(out.find('\x07') == std::string::npos);
}
#endif

TEST_CASE("a lookup after warmup allocates nothing", "[cache]") {
  TempDir tmp;
  const auto options = options_at(tmp.path);
  Compiler compiler(options.cuda_home);
  Cache cache(options, compiler);
  const auto c = small_contract();
  const Key key = cache.get(c).entry->manifest.key;
  const long before = moejit::test::g_allocations.load();
  const CacheEntry* found = nullptr;
  for (int i = 0; i < 1000; ++i) found = cache.find(key);
  const long after = moejit::test::g_allocations.load();
  CHECK(found != nullptr);
  CHECK(after - before == 0);
}

TEST_CASE("threads asking for one key compile it once", "[cache]") {
  TempDir tmp;
  const auto options = options_at(tmp.path);
  Compiler compiler(options.cuda_home);
  Cache cache(options, compiler);
  const auto c = small_contract(16, "gelu");
  std::atomic<int> compiled{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&] {
      if (cache.get(c).source == Source::compiled) ++compiled;
    });
  }
  for (auto& t : threads) t.join();
  CHECK(compiled == 1);
}

TEST_CASE("the public warmup compiles each contract of the specs once, then finds them on disk", "[cache][warmup]") {
  TempDir tmp;
  auto options = options_at(tmp.path);
  options.jobs = 2;
  // Two specs that share one op: one entry, labelled by both.
  const std::vector<Spec> specs = {
      parse_spec(R"({"model": "a", "archs": ["sm_90a"], "ops": [{"name": "act", "op": "activation", "kind": "silu", "d": 64},
                                                               {"name": "g", "op": "activation", "kind": "gelu", "d": 64}]})",
                 "a.json"),
      parse_spec(R"({"model": "b", "archs": ["sm_90a"], "ops": [{"name": "act2", "op": "activation", "kind": "silu", "d": 64}]})",
                 "b.json")};
  std::vector<std::size_t> finished;
  const auto first = warmup(specs, options, {}, [&](const WarmupEntry& e, std::size_t done, std::size_t total) {
    CHECK(total == 2);
    CHECK(e.source == "compiled");
    finished.push_back(done);
  });
  CHECK(finished == std::vector<std::size_t>{1, 2});
  CHECK((first.specs == 2 && first.jobs == 3 && first.entries.size() == 2 && first.threads == 2));
  CHECK(first.count("compiled") == 2);
  CHECK(first.ok());
  CHECK(first.cache == (tmp.path / "cache" / "v3").string());
  const auto shared = std::ranges::find_if(first.entries, [](const WarmupEntry& e) { return e.labels.size() == 2; });
  REQUIRE(shared != first.entries.end());
  CHECK(shared->labels == std::vector<std::string>{"a.json act", "b.json act2"});
  for (const auto& e : first.entries) {
    CHECK((e.arch == "sm_90a" && e.key.size() == 32 && e.registers > 0 && e.spill_bytes == 0 && e.error.empty()));
  }

  // A second warmup (a new cache object: nothing in memory) reads every entry back from disk;
  // archs given replace the specs' own.
  const auto again = warmup(specs, options);
  CHECK(again.count("disk") == 2);
  const std::vector<std::string> both = {"sm_90a", "sm_100a"};
  const auto wider = warmup(specs, options, both);
  CHECK((wider.entries.size() == 4 && wider.count("disk") == 2 && wider.count("compiled") == 2));

  // warmup_contracts lists what a warmup of one spec compiles (a warm start loads): op by op,
  // each for the spec's archs or for the archs given.
  const auto listed = warmup_contracts(specs[0]);
  REQUIRE(listed.size() == 2);
  CHECK((listed[0].arch() == "sm_90a" && listed[0].text() != listed[1].text()));
  const auto listed_both = warmup_contracts(specs[0], both);
  REQUIRE(listed_both.size() == 4);
  CHECK((listed_both[0].arch() == "sm_90a" && listed_both[1].arch() == "sm_100a" && listed_both[0].text() != listed_both[1].text()));
  CHECK(listed_both[0] == listed[0]);

  const std::vector<std::string> bad = {"sm_80"};
  try {
    warmup(specs, options, bad);
    FAIL("an unsupported arch was accepted");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::usage);
    CHECK_THAT(e.what(), Catch::Contains("sm_80") && Catch::Contains("sm_90a"));
  }
}

TEST_CASE("prune keeps the most recently used entries", "[cache]") {
  TempDir tmp;
  const auto options = options_at(tmp.path);
  Compiler compiler(options.cuda_home);
  Cache cache(options, compiler);
  const auto old_c = small_contract(8), new_c = small_contract(16);
  const auto old_key = cache.get(old_c).entry->manifest.key;
  const auto new_key = cache.get(new_c).entry->manifest.key;
  fs::last_write_time(entry_dir(cache, old_key) / "manifest.json", fs::file_time_type::clock::now() - std::chrono::hours(5));
  const auto entries = cache.list();
  REQUIRE(entries.size() == 2);
  const auto r = cache.prune(std::max(entries[0].bytes, entries[1].bytes));
  CHECK(r.removed == 1);
  REQUIRE(cache.list().size() == 1);
  CHECK(cache.list()[0].key_hex == new_key.hex());
  CHECK(cache.prune(0).removed == 1);
  CHECK(cache.list().empty());
}

TEST_CASE("export and import move a warmed cache to another path", "[cache]") {
  TempDir a, b;
  const auto opts_a = options_at(a.path), opts_b = options_at(b.path);
  Compiler compiler(opts_a.cuda_home);
  Cache src(opts_a, compiler);
  src.get(small_contract(8));
  src.get(small_contract(24, "gelu_tanh"));
  const auto bundle = a.path / "bundle.moejit";
  CHECK(src.export_bundle(bundle) == 2);

  Cache dst(opts_b, compiler);
  auto r = dst.import_bundle(bundle);
  CHECK(r.imported == 2);
  CHECK(dst.verify(false).empty());
  CHECK(dst.get(small_contract(8)).source == Source::disk);
  CHECK(dst.import_bundle(bundle).present == 2);

  SECTION("a damaged bundle is refused as bad input") {
    std::string data = read_file(bundle);
    data[data.size() / 2] = static_cast<char>(data[data.size() / 2] ^ 1);
    overwrite(bundle, data);
    try {
      dst.import_bundle(bundle);
      FAIL("a damaged bundle was accepted");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::input);
    }
    overwrite(bundle, data.substr(0, data.size() / 2));
    CHECK_THROWS_AS(dst.import_bundle(bundle), Error);
  }
}

#ifdef MOEJIT_CLI
TEST_CASE("many processes warming the same specs all end with valid entries, each key compiled once", "[cache][processes]") {
  TempDir tmp;
  const auto spec = tmp.path / "spec.json";
  overwrite(spec, R"({"model": "m", "archs": ["sm_90a"], "ops": [
    {"name": "a", "op": "activation", "kind": "silu", "d": 40},
    {"name": "b", "op": "activation", "kind": "gelu", "d": 48},
    {"name": "c", "op": "activation", "kind": "situ", "beta": 2.0, "d": 56},
    {"name": "d", "op": "activation", "kind": "silu", "d": 40, "layout": "masked", "num_experts": 3}]})");
  const std::string cache_env = "MOEJIT_CACHE_DIR=" + (tmp.path / "cache").string();
  constexpr int kProcesses = 6;
  std::vector<pid_t> pids;
  for (int i = 0; i < kProcesses; ++i) {
    const auto out = (tmp.path / fmt::format("out{}.txt", i)).string();
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    std::vector<std::string> env_strings = {cache_env, "MOEJIT_JOBS=2"};
    for (char** e = environ; *e; ++e) {
      if (std::string(*e).rfind("MOEJIT_", 0) != 0) env_strings.emplace_back(*e);
    }
    std::vector<char*> envp;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::string exe = MOEJIT_CLI, cmd = "warmup", q = "-q", file = spec.string();
    char* argv[] = {exe.data(), cmd.data(), q.data(), file.data(), nullptr};
    pid_t pid = 0;
    REQUIRE(posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv, envp.data()) == 0);
    posix_spawn_file_actions_destroy(&actions);
    pids.push_back(pid);
  }
  int compiled = 0;
  for (int i = 0; i < kProcesses; ++i) {
    int status = 0;
    REQUIRE(waitpid(pids[static_cast<std::size_t>(i)], &status, 0) == pids[static_cast<std::size_t>(i)]);
    const auto text = read_file(tmp.path / fmt::format("out{}.txt", i));
    INFO("process " << i << " printed:\n" << text);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    std::smatch m;
    REQUIRE(std::regex_search(text, m, std::regex(R"(: (\d+) compiled)")));
    compiled += std::stoi(m[1]);
  }
  CHECK(compiled == 4);  // four distinct keys, each compiled by exactly one process

  auto options = Options::from_environment();
  options.cache_dir = tmp.path / "cache";
  Compiler compiler(options.cuda_home);
  Cache cache(options, compiler);
  CHECK(cache.list().size() == 4);
  CHECK(cache.verify(false).empty());
  CHECK(count_in(cache.root() / "tmp") == 0);
}
#endif

TEST_CASE("MOEJIT_JOBS is a thread count or an error naming it, never silently ignored", "[options]") {
  ::setenv("MOEJIT_JOBS", "7", 1);
  CHECK(Options::from_environment().jobs == 7);
  ::setenv("MOEJIT_JOBS", "1024", 1);
  CHECK(Options::from_environment().jobs == 1024);
  for (const char* bad : {"abc", "0", "-3", "1025", "100000", " 4", "4 ", "+4", "0x10", "1e2", "4.0", "99999999999999999999"}) {
    INFO(bad);
    ::setenv("MOEJIT_JOBS", bad, 1);
    try {
      (void)Options::from_environment();
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.is_bad_input());
      CHECK(e.fields().pointer == "MOEJIT_JOBS");
      CHECK_THAT(std::string(e.what()), Catch::Matchers::Contains(fmt::format("found '{}'", bad)));
      CHECK_THAT(std::string(e.what()), Catch::Matchers::Contains("[1, 1024]"));
    }
  }
  ::unsetenv("MOEJIT_JOBS");
  CHECK(Options::from_environment().jobs >= 1);
  CHECK(warmup_threads(100000, 2) == 2);
  CHECK(warmup_threads(0, 5) == 1);
  CHECK(warmup_threads(3, 0) == 1);
}

// NOTE: here beside the cache's own tests because error messages are what the cache's users read.
TEST_CASE("error text escapes control characters and cuts long values", "[error]") {
  CHECK(moejit::detail::printable("soft\nmax\x1b[31m\t\x7f") == "soft\\nmax\\x1b[31m\\t\\x7f");
  CHECK(moejit::detail::printable("caf\xc3\xa9 \xc2\x9b") == "caf\xc3\xa9 \\u009b");  // UTF-8 kept, C1 escaped
  // Bytes that are not well-formed UTF-8 (stray, cut, overlong, surrogate) escaped one by one.
  CHECK(moejit::detail::printable("m\xff\xfe \xc3 \xc0\xaf \xed\xa0\x80 \xf0\x9f\x98\x80") ==
        "m\\xff\\xfe \\xc3 \\xc0\\xaf \\xed\\xa0\\x80 \xf0\x9f\x98\x80");
  const std::string huge(20000, 'a');
  const auto cut = moejit::detail::printable(huge);
  CHECK(cut == std::string(200, 'a') + "... (19800 more bytes)");
  CHECK(moejit::detail::printable(std::string(199, 'a') + "\xc3\xa9") == std::string(199, 'a') + "... (2 more bytes)");

  const Error e({.kind = ErrorKind::spec, .message = fmt::format("unknown scoring '{}' and '{}'", "soft\nmax", huge),
                 .file = "s\n.json", .pointer = "/ops/0/scoring", .found = huge, .expected = "one of softmax"});
  const std::string what = e.what();
  CHECK(what.find('\n') == std::string::npos);
  CHECK(what.size() < 1000);
  CHECK_THAT(what, Catch::Matchers::StartsWith("s\\n.json: /ops/0/scoring: unknown scoring 'soft\\nmax' and 'aaa"));
  CHECK_THAT(what, Catch::Matchers::Contains("a... (19800 more bytes)'; found aaa"));
  CHECK_THAT(what, Catch::Matchers::EndsWith("a... (19800 more bytes); expected one of softmax"));
  // Compile errors keep their multi-line parts as they are.
  const Error c({.kind = ErrorKind::compile, .message = "failed", .log = "line 1\nline 2"});
  CHECK_THAT(std::string(c.what()), Catch::Matchers::EndsWith("\n--- log ---\nline 1\nline 2"));
}

// NOTE: here because `cache prune --max-size` is what takes a size.
TEST_CASE("sizes are exact: decimal digits, a fraction of up to 9 digits, a unit from the list", "[cache][cli]") {
  using moejit::tools::parse_size;
  CHECK(parse_size("0") == 0);
  CHECK(parse_size("1048576") == 1048576);
  CHECK(parse_size("512B") == 512);
  CHECK(parse_size("500M") == 500'000'000);
  CHECK(parse_size("2G") == 2'000'000'000);
  CHECK(parse_size("1.5K") == 1500);
  CHECK(parse_size("1.5GiB") == 1610612736);
  CHECK(parse_size("0.001K") == 1);
  CHECK(parse_size("0.999999999KiB") == 1023);  // whole bytes, rounded down
  CHECK(parse_size("18446744073709551615") == 18446744073709551615u);
  CHECK(parse_size("17179869183.999999999GiB") == 18446744073709551614u);  // 2^64 - 2^30 + floor(0.999999999 * 2^30)
  for (const char* bad : {"", "inf", "nan", "-1", "+1", "0x10", "1e3", " 2G", "2G ", "2 G", "2g", "1.5", "1.5B", ".5G",
                          "5.G", "1.0000000001G", "2TB", "18446744073709551616", "99999999999999999999G", "17179869184GiB"}) {
    INFO(bad);
    try {
      (void)parse_size(bad);
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::usage);
    }
  }
}

TEST_CASE("MOEJIT_PDL=1 turns programmatic dependent launch on; any other value leaves it off", "[options]") {
  ::setenv("MOEJIT_PDL", "1", 1);
  CHECK(Options::from_environment().programmatic_launch);
  ::setenv("MOEJIT_PDL", "yes", 1);
  CHECK_FALSE(Options::from_environment().programmatic_launch);
  ::unsetenv("MOEJIT_PDL");
  CHECK_FALSE(Options::from_environment().programmatic_launch);
}

namespace {
// Sets `variable` to `value` and checks that reading the options is a usage error naming both.
void check_usage_error(const char* variable, const char* value) {
  ::setenv(variable, value, 1);
  try {
    (void)Options::from_environment();
    FAIL(fmt::format("no error for {}={}", variable, value));
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::usage);
    CHECK(e.fields().pointer == variable);
    CHECK(e.fields().found == fmt::format("'{}'", value));
  }
}
}  // namespace

TEST_CASE("MOEJIT_EXPERTS_STASH=0 turns the one-token GEMM2's weight stash off, 1 or unset on; anything else is an error", "[options]") {
  ::setenv("MOEJIT_EXPERTS_STASH", "0", 1);
  CHECK_FALSE(Options::from_environment().experts_stash);
  ::setenv("MOEJIT_EXPERTS_STASH", "1", 1);
  CHECK(Options::from_environment().experts_stash);
  check_usage_error("MOEJIT_EXPERTS_STASH", "off");
  ::unsetenv("MOEJIT_EXPERTS_STASH");
  CHECK(Options::from_environment().experts_stash);
}

TEST_CASE("MOEJIT_EXPERTS_PATH picks the experts' GEMMs: auto, decode or prefill; anything else is an error", "[options]") {
  ::setenv("MOEJIT_EXPERTS_PATH", "decode", 1);
  CHECK(Options::from_environment().experts_path == Options::ExpertsPath::decode);
  ::setenv("MOEJIT_EXPERTS_PATH", "prefill", 1);
  CHECK(Options::from_environment().experts_path == Options::ExpertsPath::prefill);
  ::setenv("MOEJIT_EXPERTS_PATH", "auto", 1);
  CHECK(Options::from_environment().experts_path == Options::ExpertsPath::automatic);
  check_usage_error("MOEJIT_EXPERTS_PATH", "wgmma");
  ::unsetenv("MOEJIT_EXPERTS_PATH");
  CHECK(Options::from_environment().experts_path == Options::ExpertsPath::automatic);
}
