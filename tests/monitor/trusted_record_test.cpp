// The device plugin's record of a container, as the node agent reads it.
#include "monitor/trusted_record.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "support/temp_dir.hpp"

namespace hami::monitor {
namespace {

constexpr uint64_t MiB = 1ull << 20;

TEST(TrustedRecord, ReadsWhatThePluginWrites) {
  auto r = parse_trusted_record(
      "# written by hami-device-plugin for pod p, container main\n"
      "CUDA_DEVICE_MEMORY_LIMIT_0=3000m\nCUDA_DEVICE_MEMORY_LIMIT_1=1000m\n"
      "CUDA_DEVICE_SM_LIMIT=30\nCUDA_TASK_PRIORITY=0\nGPU_CORE_UTILIZATION_POLICY=force\n"
      "CUDA_DEVICE_MEMORY_SHARED_CACHE=/usr/local/vgpu/abc.cache\n"
      "VGPU_DEVICE_UUID_0=GPU-a\nVGPU_DEVICE_UUID_1=GPU-b\n",
      "rec");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->priority, 0);
  EXPECT_EQ(r->gpu_uuids, (std::vector<std::string>{"GPU-a", "GPU-b"}));
  EXPECT_EQ(r->memory_limit[0], 3000 * MiB);
  EXPECT_EQ(r->memory_limit[1], 1000 * MiB);
  EXPECT_EQ(r->memory_limit[2], 0u);
  EXPECT_EQ(r->sm_limit[0], 30u);
  EXPECT_EQ(r->state_file_name, "abc.cache");
}

TEST(TrustedRecord, OlderRecordsLeaveTheRestToTheStateFile) {
  auto r = parse_trusted_record("CUDA_DEVICE_MEMORY_LIMIT_0=3000m\nCUDA_DEVICE_SM_LIMIT=30\n", "r");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(r->priority);
  EXPECT_TRUE(r->gpu_uuids.empty());
  EXPECT_EQ(r->state_file_name, "");
}

TEST(TrustedRecord, AnMpsClientsRecordGivesItsThreadPercentage) {
  auto r = parse_trusted_record(
      "CUDA_DEVICE_MEMORY_LIMIT_0=4096m\n"
      "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=30\n",
      "rec");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->mps_thread_percentage, 30u);
  auto plain = parse_trusted_record("CUDA_DEVICE_SM_LIMIT=30\n", "rec");
  ASSERT_TRUE(plain);
  EXPECT_FALSE(plain->mps_thread_percentage);
}

TEST(TrustedRecord, ValuesThatCannotBeReadAreErrors) {
  for (const char* text :
       {"CUDA_TASK_PRIORITY=-2147483648\n", "CUDA_DEVICE_MEMORY_LIMIT_0=lots\n",
        "CUDA_DEVICE_SM_LIMIT=300\n", "not a pair\n",
        "CUDA_DEVICE_MEMORY_SHARED_CACHE=/usr/local/vgpu/\n",
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=0\n", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=101\n"}) {
    SCOPED_TRACE(text);
    EXPECT_FALSE(parse_trusted_record(text, "rec"));
  }
}

TEST(TrustedRecord, OnlyAFileOthersCannotWriteIsTrusted) {
  test::TempDir dir;
  EXPECT_FALSE(*read_trusted_record(dir.file("missing")));
  const std::string path = dir.file("rec");
  std::ofstream(path) << "CUDA_TASK_PRIORITY=0\n";
  ::chmod(path.c_str(), 0644);
  auto ok = read_trusted_record(path);
  ASSERT_TRUE(ok && *ok);
  EXPECT_EQ((*ok)->priority, 0);
  ::chmod(path.c_str(), 0666);
  auto writable = read_trusted_record(path);
  ASSERT_FALSE(writable);
  EXPECT_NE(writable.error().message.find("writable by group or others"), std::string::npos);
  ::chmod(path.c_str(), 0644);
  std::filesystem::create_symlink(path, dir.file("link"));
  EXPECT_FALSE(read_trusted_record(dir.file("link")));
}

// The plugin's layout since resizes: a directory (mounted read-only in the
// container) holding the file `limits`, which a resize replaces by rename.
TEST(TrustedRecord, ReadsTheRecordInItsDirectoryAndFollowsAReplacement) {
  test::TempDir dir;
  const std::string rec = dir.file("pod_main");
  std::filesystem::create_directory(rec);
  ::chmod(rec.c_str(), 0755);
  EXPECT_FALSE(*read_trusted_record(rec)) << "a directory without a record: none yet";
  std::ofstream(rec + "/limits") << "CUDA_DEVICE_MEMORY_LIMIT_0=4g\n";
  ::chmod((rec + "/limits").c_str(), 0644);
  auto first = read_trusted_record(rec);
  ASSERT_TRUE(first && *first);
  EXPECT_EQ((*first)->memory_limit[0], 4096 * MiB);
  EXPECT_EQ((*first)->path, rec + "/limits");
  std::ofstream(rec + "/limits.tmp") << "CUDA_DEVICE_MEMORY_LIMIT_0=8g\n";
  ::chmod((rec + "/limits.tmp").c_str(), 0644);
  std::filesystem::rename(rec + "/limits.tmp", rec + "/limits");
  auto resized = read_trusted_record(rec);
  ASSERT_TRUE(resized && *resized);
  EXPECT_EQ((*resized)->memory_limit[0], 8192 * MiB);
  // Whoever could write the directory could swap the file.
  ::chmod(rec.c_str(), 0777);
  auto open_dir = read_trusted_record(rec);
  ASSERT_FALSE(open_dir);
  EXPECT_NE(open_dir.error().message.find("writable by group or others"), std::string::npos);
}

}  // namespace
}  // namespace hami::monitor
