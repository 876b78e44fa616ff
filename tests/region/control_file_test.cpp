// The control file: the agent's decisions on a channel the container only reads.
#include "region/control_file.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "support/temp_dir.hpp"

namespace hami::region {
namespace {

void write_file(const std::string& path, const std::string& bytes, mode_t mode = 0644) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  ::chmod(path.c_str(), mode);
}

TEST(ControlFile, TheAgentsWritesReachAMappedReader) {
  test::TempDir dir;
  const std::string path = dir.file("control");
  write_file(path, control_file_bytes());
  auto view = ControlView::open(path);
  ASSERT_TRUE(view) << view.error().message;
  EXPECT_EQ(view->utilization_switch(), 1) << "enforced until the agent says otherwise";
  EXPECT_FALSE(view->blocked());
  ASSERT_TRUE(write_control(path, {.utilization_switch = 0, .blocked = 1}));
  EXPECT_EQ(view->utilization_switch(), 0);
  EXPECT_TRUE(view->blocked());
  EXPECT_EQ(std::filesystem::file_size(path), kControlFileSize) << "rewritten in place";
}

TEST(ControlFile, AnythingButOurFileIsRefusedUntouched) {
  test::TempDir dir;
  const std::string good = control_file_bytes();
  std::string wrong_magic = good;
  wrong_magic[0] = 'X';
  for (const auto& [name, bytes] : std::vector<std::pair<std::string, std::string>>{
           {"short", good.substr(0, 10)}, {"long", good + "x"}, {"magic", wrong_magic}}) {
    SCOPED_TRACE(name);
    const std::string path = dir.file(name);
    write_file(path, bytes);
    EXPECT_FALSE(ControlView::open(path));
    EXPECT_FALSE(write_control(path, {.utilization_switch = 0}));
    std::ifstream in(path, std::ios::binary);
    EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), bytes);
  }
  const std::string target = dir.file("target");
  write_file(target, good);
  std::filesystem::create_symlink(target, dir.file("link"));
  auto linked = ControlView::open(dir.file("link"));
  ASSERT_FALSE(linked);
  EXPECT_NE(linked.error().message.find("symbolic link"), std::string::npos);
  EXPECT_FALSE(write_control(dir.file("link"), {.utilization_switch = 0}));
}

// The agent writes only a file no one else may write: one a tenant could have
// put there, or could rewrite itself, is not the device plugin's.
TEST(ControlFile, TheAgentWritesOnlyAFileOthersCannotWrite) {
  test::TempDir dir;
  const std::string path = dir.file("control");
  write_file(path, control_file_bytes(), 0666);
  auto r = write_control(path, {.utilization_switch = 0});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("writable by group or others"), std::string::npos);
}

TEST(ControlFile, FixedViewNeverChanges) {
  const ControlView v = ControlView::fixed({.utilization_switch = 1, .blocked = 0});
  EXPECT_EQ(v.utilization_switch(), 1);
  EXPECT_FALSE(v.blocked());
}

}  // namespace
}  // namespace hami::region
