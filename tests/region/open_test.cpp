// Creating and attaching state files: permissions without touching the umask,
// one initialisation among concurrent creators, and invalid files refused
// without a single byte written.
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <vector>

#include "region/region.hpp"
#include "support/fixtures.hpp"
#include "support/temp_dir.hpp"

namespace hami::region {
namespace {

mode_t file_mode(const std::string& path) {
  struct stat st {};
  ::stat(path.c_str(), &st);
  return st.st_mode & 07777;
}

mode_t current_umask() {
  const mode_t m = ::umask(022);
  ::umask(m);
  return m;
}

TEST(RegionOpen, CreatesInitialisedFile) {
  test::TempDir dir;
  const std::string path = dir.file("a.cache");
  OpenOptions opt;
  opt.initial.memory_limit[0] = 3000ull << 20;
  opt.initial.memory_limit[5] = 1ull << 30;
  opt.initial.sm_limit[0] = 30;
  opt.initial.priority = 0;
  const auto before = static_cast<uint64_t>(std::time(nullptr));
  auto r = Region::open(path, opt);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(std::filesystem::file_size(path), kFileSize);
  const SharedRegion& raw = r->raw();
  EXPECT_EQ(raw.initialized_flag, kMagic);
  EXPECT_EQ(raw.major_version, 1u);
  EXPECT_EQ(raw.minor_version, 2u);
  EXPECT_EQ(r->memory_limit(0), 3000ull << 20);
  EXPECT_EQ(r->memory_limit(5), 1ull << 30);
  EXPECT_EQ(r->memory_limit(1), 0u);
  EXPECT_EQ(r->sm_limit(0), 30u);
  EXPECT_EQ(r->sm_limit(1), 100u);
  EXPECT_EQ(r->priority(), 0);
  EXPECT_EQ(r->utilization_switch(), 1);
  EXPECT_EQ(r->recent_kernel(), 2);
  EXPECT_EQ(r->proc_num(), 0);
  EXPECT_GE(r->last_kernel_time(), before);
  EXPECT_EQ(raw.owner_pid, 0u);
  // Upstream's semaphore is initialised (value 1), so upstream code never blocks on it.
  int sem_value = 0;
  std::memcpy(&sem_value, raw.sem.bytes, sizeof sem_value);
  EXPECT_EQ(sem_value, 1);

  auto snap = read_snapshot(path);
  ASSERT_TRUE(snap) << snap.error().message;
  EXPECT_TRUE(snap->writable);
  EXPECT_TRUE(snap->slots.empty());
}

// A container's first process creates its file and registers: only the pages
// it uses (the header with slot 0, the tail) are brought into memory. Zeroing
// the whole file through the mapping, or faulting in an uncached page (which
// makes the kernel read around it), put all 491 pages in the page cache, 2 MiB
// per container; with 256 starting at once that cost 0.4-0.6 s of start-up.
TEST(RegionOpen, NewFileBringsOnlyThePagesItUsesIntoMemory) {
  test::TempDir dir;
  struct statfs fs {};
  ASSERT_EQ(::statfs(dir.path().c_str(), &fs), 0);
  // tmpfs backs fallocate() with memory at once: nothing to measure there.
  if (fs.f_type == TMPFS_MAGIC) GTEST_SKIP() << dir.path() << " is a tmpfs";
  const std::string path = dir.file("a.cache");
  OpenOptions opt;
  opt.initial.memory_limit[0] = 1ull << 30;
  auto r = Region::open(path, opt);
  ASSERT_TRUE(r) << r.error().message;
  auto me = self_identity();
  ASSERT_TRUE(me) << me.error().message;
  auto slot = r->register_process(*me);
  ASSERT_TRUE(slot) << slot.error().message;
  ASSERT_EQ(*slot, 0);
  r->slot(*slot).add_usage(0, UsageKind::kData, 1 << 20);
  EXPECT_EQ(r->device_usage(0), 1u << 20);
  const long page = ::sysconf(_SC_PAGESIZE);
  const size_t pages = (kRegionSize + static_cast<size_t>(page) - 1) / static_cast<size_t>(page);
  std::vector<unsigned char> resident(pages);
  ASSERT_EQ(::mincore(&r->raw(), kRegionSize, resident.data()), 0) << std::strerror(errno);
  size_t in_memory = 0;
  for (unsigned char v : resident)
    in_memory += v & 1;
  EXPECT_LE(in_memory, 8u) << "of " << pages << " pages";
  // The rest reads as zeros all the same.
  auto snap = read_snapshot(path);
  ASSERT_TRUE(snap) << snap.error().message;
  ASSERT_EQ(snap->slots.size(), 1u);
  EXPECT_EQ(r->proc_num(), 1);
  for (int i = 1; i < kMaxProcesses; ++i)
    ASSERT_EQ(r->raw().procs[i].pid, 0) << i;
}

TEST(RegionOpen, ModeIsExactAndUmaskUntouched) {
  test::TempDir dir;
  const mode_t saved = ::umask(077);
  auto a = Region::open(dir.file("a.cache"));
  OpenOptions opt;
  opt.file_mode = 0640;
  auto b = Region::open(dir.file("b.cache"), opt);
  const mode_t after = current_umask();
  ::umask(saved);
  ASSERT_TRUE(a) << a.error().message;
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_EQ(after, 077u);
  EXPECT_EQ(file_mode(dir.file("a.cache")), 0666u);
  EXPECT_EQ(file_mode(dir.file("b.cache")), 0640u);
}

TEST(RegionOpen, SecondOpenAttachesAndIgnoresItsInitialValues) {
  test::TempDir dir;
  const std::string path = dir.file("a.cache");
  OpenOptions first;
  first.initial.memory_limit[0] = 1ull << 30;
  auto a = Region::open(path, first);
  ASSERT_TRUE(a);
  OpenOptions second;
  second.initial.memory_limit[0] = 8ull << 30;
  auto b = Region::open(path, second);
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_EQ(b->memory_limit(0), 1ull << 30);
  a->set_recent_kernel(-1);
  EXPECT_EQ(b->recent_kernel(), -1);  // same shared mapping
}

TEST(RegionOpen, AttachOnlyNeedsAnExistingFile) {
  test::TempDir dir;
  const std::string path = dir.file("missing.cache");
  auto r = Region::open(path, OpenOptions{.create = false});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find(path), std::string::npos);
  EXPECT_EQ(r.error().sys_errno, ENOENT);
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(RegionOpen, CrashedCreatorsFileIsInitialised) {
  test::TempDir dir;
  const std::string path = dir.file("half.cache");
  // A creator that died after sizing the file but before writing the magic.
  std::vector<std::byte> bytes(kFileSize, std::byte{0});
  bytes[100] = std::byte{0x7f};
  test::write_file(path, bytes);
  auto r = Region::open(path);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->raw().initialized_flag, kMagic);
  EXPECT_EQ(r->device_uuid(0), "");  // the stray byte was cleared with the rest
}

struct BadFile {
  const char* name;
  std::vector<std::byte> bytes;
  const char* expect;  // substring of the error
};

std::vector<std::byte> header_file(size_t size, int32_t magic, uint32_t major, uint32_t minor) {
  std::vector<std::byte> b(size, std::byte{0});
  if (size >= 12) {
    std::memcpy(b.data(), &magic, 4);
    std::memcpy(b.data() + 4, &major, 4);
    std::memcpy(b.data() + 8, &minor, 4);
  }
  for (size_t i = 12; i < size; i += 4099)
    b[i] = std::byte{0x5a};  // content to compare
  return b;
}

TEST(RegionOpen, InvalidFilesAreRefusedUnchanged) {
  const std::vector<BadFile> cases = {
      {"short", header_file(100, kMagic, 1, 2), "too short"},
      {"text", {std::byte{'h'}, std::byte{'i'}, std::byte{'\n'}}, "too short"},
      {"magic", header_file(kFileSize, 0x0BADF00D, 1, 2), "wrong magic"},
      {"zero-magic-odd-size", header_file(kFileSize + 7, 0, 1, 2), "not initialised"},
      {"size", header_file(kFileSize + 7, kMagic, 1, 2), "matches no known layout"},
      {"major", header_file(kFileSize, kMagic, 2, 0), "newer"},
      {"minor", header_file(kFileSize, kMagic, 1, 9), "read-only"},
      {"v0", header_file(1197897, kMagic, 0, 0), "read-only"},
      {"atomics", header_file(2008985, kMagic, 1, 1), "read-only"},
  };
  test::TempDir dir;
  for (const BadFile& c : cases) {
    const std::string path = dir.file(std::string(c.name) + ".cache");
    test::write_file(path, c.bytes);
    struct stat before {};
    ::stat(path.c_str(), &before);
    auto r = Region::open(path);
    ASSERT_FALSE(r) << c.name;
    EXPECT_NE(r.error().message.find(path), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find(c.expect), std::string::npos) << r.error().message;
    EXPECT_EQ(test::read_file(path), c.bytes) << c.name << " was modified";
    struct stat after {};
    ::stat(path.c_str(), &after);
    EXPECT_EQ(before.st_mtim.tv_sec, after.st_mtim.tv_sec) << c.name;
    EXPECT_EQ(before.st_mtim.tv_nsec, after.st_mtim.tv_nsec) << c.name;
    EXPECT_EQ(before.st_blocks, after.st_blocks) << c.name << " had blocks allocated";
  }
}

TEST(RegionOpen, RefusesSymlinksDirectoriesAndFifos) {
  test::TempDir dir;
  auto target = Region::open(dir.file("real.cache"));
  ASSERT_TRUE(target);
  ::symlink(dir.file("real.cache").c_str(), dir.file("link.cache").c_str());
  auto link = Region::open(dir.file("link.cache"));
  ASSERT_FALSE(link);
  EXPECT_NE(link.error().message.find("symbolic link"), std::string::npos);

  std::filesystem::create_directory(dir.file("d.cache"));
  auto d = Region::open(dir.file("d.cache"));
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message.find(dir.file("d.cache")), std::string::npos);

  ::mkfifo(dir.file("fifo.cache").c_str(), 0600);
  auto f = Region::open(dir.file("fifo.cache"));  // must not block
  ASSERT_FALSE(f);
  EXPECT_NE(f.error().message.find("not a regular file"), std::string::npos);
  auto s = read_snapshot(dir.file("fifo.cache"));
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("not a regular file"), std::string::npos);
}

// A file system that cannot hold the file (here: RLIMIT_FSIZE) gives an error,
// not a SIGBUS in the application later; a retry once space exists succeeds.
TEST(RegionOpen, NoSpaceIsAnErrorNotACrash) {
  test::TempDir dir;
  const std::string path = dir.file("nospace.cache");
  pid_t pid = ::fork();
  if (pid == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim {
      1 << 20, 1 << 20
    };
    ::setrlimit(RLIMIT_FSIZE, &lim);
    auto r = Region::open(path);
    if (r) _exit(10);
    _exit(r.error().message.find("cannot allocate") != std::string::npos ? 0 : 11);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << "child crashed with signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  auto retry = Region::open(path);
  ASSERT_TRUE(retry) << retry.error().message;
  EXPECT_EQ(retry->raw().initialized_flag, kMagic);
}

// Many processes race to create one file: all succeed, exactly one initialises.
TEST(RegionOpen, ConcurrentCreatorsAgree) {
  constexpr int kCreators = 16;
  test::TempDir dir;
  const std::string path = dir.file("race.cache");
  int go[2], results[2];
  ASSERT_EQ(::pipe(go), 0);
  ASSERT_EQ(::pipe(results), 0);
  std::vector<pid_t> pids;
  for (int i = 0; i < kCreators; ++i) {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(go[1]);
      char c;
      (void)!::read(go[0], &c, 1);  // released together when the parent closes the pipe
      OpenOptions opt;
      opt.initial.memory_limit[0] = static_cast<uint64_t>(i + 1) << 30;
      opt.initial.priority = i;
      auto r = Region::open(path, opt);
      int64_t seen[2] = {-1, -1};
      if (r) {
        seen[0] = static_cast<int64_t>(r->memory_limit(0) >> 30);
        seen[1] = r->priority();
      }
      (void)!::write(results[1], seen, sizeof seen);
      _exit(r ? 0 : 1);
    }
    pids.push_back(pid);
  }
  ::close(go[0]);
  ::close(go[1]);
  ::close(results[1]);
  std::vector<std::pair<int64_t, int64_t>> seen;
  int64_t v[2];
  while (::read(results[0], v, sizeof v) == static_cast<ssize_t>(sizeof v))
    seen.emplace_back(v[0], v[1]);
  for (pid_t p : pids) {
    int status = 0;
    ::waitpid(p, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  ASSERT_EQ(seen.size(), static_cast<size_t>(kCreators));
  for (const auto& s : seen) {
    EXPECT_EQ(s, seen[0]) << "creators saw different initial values";
    EXPECT_EQ(s.first, s.second + 1) << "limit and priority come from different creators";
  }
  EXPECT_EQ(std::filesystem::file_size(path), kFileSize);
}

}  // namespace
}  // namespace hami::region
