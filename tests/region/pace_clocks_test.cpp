// The container's SM pace clocks: one file beside the state file, the same
// clocks in every process that opens it, clocks of another boot or far in the
// future cleared, and files that are not ours refused untouched.
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

TEST(PaceClocks, FilesNotOursAreRefusedUntouched) {
  test::TempDir dir;
  PaceClockFile newer{};
  newer.magic = kPaceMagic;
  newer.version = kPaceVersion + 1;
  newer.devices = kMaxDevices;
  std::vector<char> foreign(kPaceFileSize, 'x');
  const struct {
    const char* name;
    std::vector<char> bytes;
    const char* says;
  } cases[] = {
      {"short", std::vector<char>(100, 0), "has 100 bytes, not the 1088 of an SM pace clock file"},
      {"foreign", foreign, "is not an SM pace clock file"},
      {"newer",
       std::vector<char>(reinterpret_cast<char*>(&newer),
                         reinterpret_cast<char*>(&newer) + sizeof newer),
       "SM pace clock file version 2 for 16 devices; this build reads version 1"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = dir.file(c.name);
    write_all(path, c.bytes.data(), c.bytes.size());
    auto clocks = PaceClocks::open(path);
    ASSERT_FALSE(clocks);
    EXPECT_NE(clocks.error().message.find(path + ": " + c.says), std::string::npos)
        << clocks.error().message;
    EXPECT_EQ(read_all(path), c.bytes) << "not a byte written";
  }
}

TEST(PaceClocks, ASymlinkOrAnUnwritableDirectoryIsAnError) {
  test::TempDir dir;
  const std::string target = dir.file("target");
  write_all(target, "", 0);
  const std::string link = dir.file("link.pace");
  std::filesystem::create_symlink(target, link);
  auto linked = PaceClocks::open(link);
  ASSERT_FALSE(linked);
  EXPECT_NE(linked.error().message.find("symbolic link"), std::string::npos);

  auto missing = PaceClocks::open(dir.file("no/such/dir.pace"));
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("cannot create"), std::string::npos)
      << missing.error().message;
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
