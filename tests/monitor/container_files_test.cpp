#include "monitor/container_files.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "region/region.hpp"
#include "support/temp_dir.hpp"

namespace hami::monitor {
namespace {

namespace fs = std::filesystem;

class ContainerFilesTest : public ::testing::Test {
 protected:
  // A valid state file, as libvgpu.so creates it.
  std::string make_state_file(const std::string& dir, const std::string& name = "vgpu.cache") {
    const std::string d = root_.path() + "/containers/" + dir;
    fs::create_directories(d);
    const std::string path = d + "/" + name;
    region::OpenOptions opt;
    opt.initial.memory_limit[0] = 1ull << 30;
    auto r = region::Region::open(path, opt);
    EXPECT_TRUE(r) << (r ? "" : r.error().message);
    return path;
  }
  std::string write_file(const std::string& dir, const std::string& name,
                         const std::string& bytes) {
    const std::string d = root_.path() + "/containers/" + dir;
    fs::create_directories(d);
    const std::string path = d + "/" + name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  static std::string read_all(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  hami::test::TempDir root_;
};

TEST(ParseContainerDir, SplitsAtTheFirstUnderscore) {
  auto r = parse_container_dir("0b7c4f9e-1a2b-4c3d-9e8f-001122334455_main_worker");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->pod_uid, "0b7c4f9e-1a2b-4c3d-9e8f-001122334455");
  EXPECT_EQ(r->container, "main_worker");
  EXPECT_FALSE(parse_container_dir("no-underscore"));
  EXPECT_FALSE(parse_container_dir("_name"));
  EXPECT_FALSE(parse_container_dir("uid_"));
  EXPECT_FALSE(parse_container_dir(""));
}

TEST_F(ContainerFilesTest, NoContainersDirectoryIsNotAnError) {
  ContainerFiles files(root_.path());
  EXPECT_TRUE(files.scan().empty());
  EXPECT_TRUE(files.problems().empty());
}

TEST_F(ContainerFilesTest, ReadsEveryValidFileWithItsPodAndContainer) {
  const std::string a = make_state_file("uid-a_main");
  const std::string b = make_state_file("uid-b_side");
  ContainerFiles files(root_.path());
  const auto found = files.scan();
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].path, a);
  EXPECT_EQ(found[0].ref, (ContainerRef{"uid-a", "main"}));
  EXPECT_EQ(found[0].snapshot.memory_limit[0], 1ull << 30);
  EXPECT_EQ(found[1].ref, (ContainerRef{"uid-b", "side"}));
  EXPECT_TRUE(files.problems().empty());
}

TEST_F(ContainerFilesTest, BadFilesAreSkippedLoggedOnceAndNeverWritten) {
  const std::string good = make_state_file("uid-a_main");
  std::string valid = read_all(good);
  const std::string truncated = write_file("uid-b_main", "vgpu.cache", valid.substr(0, 4096));
  const std::string empty = write_file("uid-c_main", "vgpu.cache", "");  // being created
  const std::string foreign =
      write_file("uid-d_main", "vgpu.cache", std::string(valid.size(), 'x'));
  write_file("badname", "vgpu.cache", valid);
  write_file("uid-e_main", "notes.txt", "ignored: not a .cache file");
  fs::create_directories(root_.path() + "/containers/uid-f_main");
  fs::create_symlink(good, root_.path() + "/containers/uid-f_main/vgpu.cache");
  const auto before = std::map<std::string, std::string>{
      {truncated, read_all(truncated)}, {empty, read_all(empty)}, {foreign, read_all(foreign)}};

  ContainerFiles files(root_.path());
  auto found = files.scan();
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].path, good);
  EXPECT_EQ(files.problems().size(), 5u);  // truncated, empty, foreign, bad name, symlink
  for (const auto& [path, why] : files.problems()) {
    SCOPED_TRACE(path);
    EXPECT_FALSE(why.empty());
    EXPECT_EQ(why.find(path), std::string::npos) << "the reason does not repeat the path";
  }
  EXPECT_NE(files.problems().at(root_.path() + "/containers/uid-f_main/vgpu.cache").find("link"),
            std::string::npos);
  const uint64_t logged = files.problems_logged();
  EXPECT_EQ(logged, 5u);

  // The same problems again: nothing new is logged, nothing was written.
  found = files.scan();
  EXPECT_EQ(found.size(), 1u);
  EXPECT_EQ(files.problems_logged(), logged);
  for (const auto& [path, bytes] : before)
    EXPECT_EQ(read_all(path), bytes) << path;
}

TEST_F(ContainerFilesTest, AHalfWrittenFileIsPickedUpOnceComplete) {
  const std::string good = make_state_file("uid-a_main");
  const std::string valid = read_all(good);
  const std::string later = write_file("uid-b_main", "vgpu.cache", valid.substr(0, 100));
  ContainerFiles files(root_.path());
  EXPECT_EQ(files.scan().size(), 1u);
  EXPECT_EQ(files.problems().count(later), 1u);
  std::ofstream(later, std::ios::binary | std::ios::trunc) << valid;
  EXPECT_EQ(files.scan().size(), 2u);
  EXPECT_TRUE(files.problems().empty());
}

TEST_F(ContainerFilesTest, VanishedAndChangedProblemsAreTracked) {
  const std::string bad = write_file("uid-a_main", "vgpu.cache", "short");
  ContainerFiles files(root_.path());
  files.scan();
  EXPECT_EQ(files.problems_logged(), 1u);
  // A different reason is logged again.
  std::ofstream(bad, std::ios::binary | std::ios::trunc) << std::string(2008953, '\0');
  files.scan();
  EXPECT_EQ(files.problems_logged(), 2u);
  // Gone: no longer a problem, and nothing to report.
  fs::remove_all(root_.path() + "/containers/uid-a_main");
  EXPECT_TRUE(files.scan().empty());
  EXPECT_TRUE(files.problems().empty());
}

}  // namespace
}  // namespace hami::monitor
