// The container's SM pace clocks: one file beside the state file, the same
// clocks in every process that opens it, clocks of another boot or far in the
// future cleared, files that are not ours (a tenant's) replaced by a fresh
// one, and a replaced file followed.
#include "region/pace_clocks.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "support/temp_dir.hpp"

namespace hami::region {
namespace {

std::vector<char> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_all(const std::string& path, const void* data, size_t size) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
}

PaceClockFile header_of(const std::string& path) {
  PaceClockFile f{};
  const auto bytes = read_all(path);
  EXPECT_EQ(bytes.size(), kPaceFileSize);
  if (bytes.size() == kPaceFileSize) std::memcpy(&f, bytes.data(), kPaceFileSize);
  return f;
}

TEST(PaceClocks, CreatesTheFileWithItsModeAndThisBoot) {
  test::TempDir dir;
  const std::string path = dir.file("a.cache.pace");
  auto clocks = PaceClocks::open(path, 0640);
  ASSERT_TRUE(clocks) << clocks.error().message;
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  const PaceClockFile f = header_of(path);
  EXPECT_EQ(f.magic, kPaceMagic);
  EXPECT_EQ(f.version, kPaceVersion);
  EXPECT_EQ(f.devices, static_cast<uint32_t>(kMaxDevices));
  EXPECT_EQ(std::string(f.boot_id), current_boot_id());
  EXPECT_EQ(current_boot_id().size(), 36u) << "Linux gives a UUID";
  for (int d = 0; d < kMaxDevices; ++d)
    EXPECT_EQ(*clocks->clock(d), 0) << d;
}

TEST(PaceClocks, EveryOpenerSeesTheSameClocks) {
  test::TempDir dir;
  const std::string path = dir.file("a.cache.pace");
  auto first = PaceClocks::open(path);
  ASSERT_TRUE(first) << first.error().message;
  std::atomic_ref<int64_t>(*first->clock(3)).store(1234);
  // Another process: it reads what the first wrote, and writes what it reads.
  const pid_t child = ::fork();
  if (child == 0) {
    auto second = PaceClocks::open(path);
    if (!second || *second->clock(3) != 1234) ::_exit(1);
    std::atomic_ref<int64_t>(*second->clock(7)).store(5678);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(std::atomic_ref<int64_t>(*first->clock(7)).load(), 5678);
  EXPECT_EQ(*first->clock(3), 1234) << "a second opener of this boot clears nothing";
}

TEST(PaceClocks, ClocksOfAnotherBootAreCleared) {
  test::TempDir dir;
  const std::string path = dir.file("a.cache.pace");
  {
    auto clocks = PaceClocks::open(path);
    ASSERT_TRUE(clocks) << clocks.error().message;
    *clocks->clock(0) = pace_clock_now_ns() + 1'000'000'000;
  }
  PaceClockFile f = header_of(path);
  std::memcpy(f.boot_id, "00000000-0000-0000-0000-000000000000", 37);
  write_all(path, &f, sizeof f);
  auto clocks = PaceClocks::open(path);
  ASSERT_TRUE(clocks) << clocks.error().message;
  EXPECT_EQ(*clocks->clock(0), 0);
  EXPECT_EQ(std::string(header_of(path).boot_id), current_boot_id());
}

TEST(PaceClocks, AClockFarAheadIsClearedAndOneNearIsKept) {
  test::TempDir dir;
  const std::string path = dir.file("a.cache.pace");
  auto first = PaceClocks::open(path);
  ASSERT_TRUE(first) << first.error().message;
  const int64_t near = pace_clock_now_ns() + 2'000'000'000;  // threads waiting behind a burst
  *first->clock(0) = near;
  *first->clock(1) = pace_clock_now_ns() + 3'600'000'000'000;  // an hour: no live clock
  auto second = PaceClocks::open(path);
  ASSERT_TRUE(second) << second.error().message;
  EXPECT_EQ(*second->clock(0), near);
  EXPECT_EQ(*second->clock(1), 0);
}

TEST(PaceClocks, AFileLeftUnfinishedIsInitialised) {
  test::TempDir dir;
  const std::string path = dir.file("a.cache.pace");
  std::vector<char> zeros(kPaceFileSize, 0);
  zeros[100] = 7;  // a clock's byte, before the magic was written
  write_all(path, zeros.data(), zeros.size());
  auto clocks = PaceClocks::open(path);
  ASSERT_TRUE(clocks) << clocks.error().message;
  EXPECT_EQ(header_of(path).magic, kPaceMagic);
  for (int d = 0; d < kMaxDevices; ++d)
    EXPECT_EQ(*clocks->clock(d), 0) << d;
}

// A tenant breaks the file before its processes start, so each would pace
// alone: whatever is there is replaced by a fresh, well-formed file.
TEST(PaceClocks, FilesNotOursAreReplacedByAFreshOne) {
  test::TempDir dir;
  PaceClockFile newer{};
  newer.magic = kPaceMagic;
  newer.version = kPaceVersion + 1;
  newer.devices = kMaxDevices;
  std::vector<char> foreign(kPaceFileSize, 'x');
  const struct {
    const char* name;
    std::vector<char> bytes;
  } cases[] = {
      {"short", std::vector<char>(1, 'x')},
      {"foreign", foreign},
      {"newer", std::vector<char>(reinterpret_cast<char*>(&newer),
                                  reinterpret_cast<char*>(&newer) + sizeof newer)},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = dir.file(c.name);
    write_all(path, c.bytes.data(), c.bytes.size());
    auto clocks = PaceClocks::open(path);
    ASSERT_TRUE(clocks) << clocks.error().message;
    const PaceClockFile h = header_of(path);
    EXPECT_EQ(h.magic, kPaceMagic);
    EXPECT_EQ(h.version, kPaceVersion);
    EXPECT_EQ(*clocks->clock(0), 0);
    EXPECT_FALSE(std::filesystem::exists(path + ".new." + std::to_string(::getpid())));
  }
}

TEST(PaceClocks, ALinkIsReplacedAndAMissingDirectoryIsAnError) {
  test::TempDir dir;
  const std::string target = dir.file("target");
  write_all(target, "", 0);
  const std::string link = dir.file("link.pace");
  std::filesystem::create_symlink(target, link);
  auto linked = PaceClocks::open(link);
  ASSERT_TRUE(linked) << linked.error().message;
  EXPECT_FALSE(std::filesystem::is_symlink(link));
  EXPECT_EQ(std::filesystem::file_size(target), 0u) << "the link's target is never written";

  auto missing = PaceClocks::open(dir.file("no/such/dir.pace"));
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("cannot create"), std::string::npos)
      << missing.error().message;

  // A directory in its place cannot be replaced: an error, for the caller to
  // fail closed.
  std::filesystem::create_directories(dir.file("d.pace/x"));
  auto directory = PaceClocks::open(dir.file("d.pace"));
  ASSERT_FALSE(directory);
}

// Processes that mapped the file before a tenant replaced (or broke) it move
// to the file the name has now, at the same address: the clock pointer the
// limiter holds stays valid and is shared again.
TEST(PaceClocks, AReplacedOrBrokenFileIsFollowed) {
  test::TempDir dir;
  const std::string path = dir.file("c.pace");
  auto a = PaceClocks::open(path);
  ASSERT_TRUE(a);
  int64_t* clock = a->clock(3);
  *clock = 12345;
  auto same = a->refresh();
  ASSERT_TRUE(same);
  EXPECT_FALSE(*same) << "nothing changed";

  std::filesystem::remove(path);
  auto b = PaceClocks::open(path);  // a new process makes a new file
  ASSERT_TRUE(b);
  *b->clock(3) = 777;
  auto moved = a->refresh();
  ASSERT_TRUE(moved) << moved.error().message;
  EXPECT_TRUE(*moved);
  EXPECT_EQ(a->clock(3), clock) << "the same address";
  EXPECT_EQ(*clock, 777) << "now the new file's clock";
  *clock = 999;
  EXPECT_EQ(*b->clock(3), 999) << "shared again";

  write_all(path, "x", 1);  // broken under both
  moved = a->refresh();
  ASSERT_TRUE(moved) << moved.error().message;
  EXPECT_TRUE(*moved);
  EXPECT_EQ(header_of(path).magic, kPaceMagic) << "repaired";
  ASSERT_TRUE(b->refresh());
  *clock = 4242;
  EXPECT_EQ(*b->clock(3), 4242);
}

TEST(PaceClocks, HeaderJudgement) {
  const std::string boot = "11111111-2222-3333-4444-555555555555";
  PaceClockFile f{};
  const auto judge = [&](uint64_t size) {
    return judge_pace_header(std::as_bytes(std::span(&f, 1)), size, boot, "p");
  };
  EXPECT_EQ(*judge_pace_header({}, 0, boot, "p"), PaceHeader::kFresh);
  EXPECT_EQ(*judge(kPaceFileSize), PaceHeader::kFresh);  // no magic yet
  f.magic = kPaceMagic;
  f.version = kPaceVersion;
  f.devices = kMaxDevices;
  EXPECT_EQ(*judge(kPaceFileSize), PaceHeader::kOtherBoot);
  std::memcpy(f.boot_id, boot.data(), boot.size());
  EXPECT_EQ(*judge(kPaceFileSize), PaceHeader::kCurrent);
  EXPECT_FALSE(judge(kPaceFileSize + 1));
  EXPECT_FALSE(
      judge_pace_header(std::as_bytes(std::span(&f, 1)).first(8), kPaceFileSize, boot, "p"));
  f.devices = 8;
  EXPECT_FALSE(judge(kPaceFileSize));
}

}  // namespace
}  // namespace hami::region
