// The SM pace clock file (`<state file>.pace`), as another process, an older
// build or a corrupted disk may have left it: the first 8 bytes claim a file
// size for judge_pace_header (any value), the rest are the file's bytes. The
// rest is also written to a real file that PaceClocks::open then opens: a file
// the parser accepts is used, any other is replaced by a fresh one, and either
// way a well-formed 1088-byte file of this boot is left.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "region/pace_clocks.hpp"

namespace {

// One file per fuzzing process, rewritten for each input; removed at exit.
struct TempFile {
  std::string path;
  TempFile() {
    char name[] = "/tmp/fuzz_pace_clocks.XXXXXX";
    const int fd = ::mkstemp(name);
    if (fd < 0) std::abort();
    ::close(fd);
    path = name;
  }
  ~TempFile() { ::unlink(path.c_str()); }
};

const std::string& temp_path() {
  static const TempFile file;
  return file.path;
}

void write_file(const std::string& path, const uint8_t* data, size_t size) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) std::abort();
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n <= 0) std::abort();
    data += n;
    size -= static_cast<size_t>(n);
  }
  ::close(fd);
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::vector<uint8_t> out;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) std::abort();
  uint8_t buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) std::abort();
    if (n == 0) break;
    out.insert(out.end(), buf, buf + n);
  }
  ::close(fd);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace r = hami::region;
  if (size < 8) return 0;
  uint64_t claimed = 0;
  std::memcpy(&claimed, data, 8);
  const uint8_t* rest = data + 8;
  const size_t rest_size = size - 8;
  const std::span<const std::byte> head(reinterpret_cast<const std::byte*>(rest), rest_size);

  // The parser alone: only an empty file or one of the exact size is accepted.
  auto verdict =
      r::judge_pace_header(head, claimed, "11111111-2222-3333-4444-555555555555", "fuzz");
  if (verdict && claimed != 0 && claimed != r::kPaceFileSize) __builtin_trap();

  // The same bytes as a real file.
  static const std::string boot = r::current_boot_id();
  const std::string& path = temp_path();
  write_file(path, rest, rest_size);
  const bool accepted = r::judge_pace_header(head, rest_size, boot, path).ok();
  {
    auto clocks = r::PaceClocks::open(path);
    if (!clocks) __builtin_trap();  // a writable directory: never an error
    if (!accepted) {
      // Replaced: every clock starts at zero.
      for (int d = 0; d < r::kMaxDevices; ++d)
        if (*clocks->clock(d) != 0) __builtin_trap();
    }
  }  // unmapped here

  // A well-formed file of this boot.
  const std::vector<uint8_t> after = read_file(path);
  if (after.size() != r::kPaceFileSize) __builtin_trap();
  r::PaceClockFile f{};
  std::memcpy(&f, after.data(), sizeof f);
  if (f.magic != r::kPaceMagic || f.version != r::kPaceVersion ||
      f.devices != static_cast<uint32_t>(r::kMaxDevices)) {
    __builtin_trap();
  }
  if (std::string(f.boot_id, strnlen(f.boot_id, sizeof f.boot_id)) != boot) __builtin_trap();
  // Clocks of another boot are cleared and those of this boot a minute ahead.
  const int64_t limit = r::pace_clock_now_ns() + 60'000'000'000;
  for (const r::PaceClock& c : f.clocks) {
    if (c.tat_ns > limit || c.reserved_ns > limit) __builtin_trap();
  }
  return 0;
}
