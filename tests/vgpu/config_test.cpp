// Limits resolution: the read-only file governs, the environment follows
// upstream's names and formats, and an unreadable limit never means unlimited.
#include "vgpu/config.hpp"

#include <gtest/gtest.h>

#include <map>

namespace hami::vgpu {
namespace {

struct Fake {
  std::map<std::string, std::string> env;
  std::map<std::string, std::string> files;
  std::map<std::string, std::string> unreadable;  // path -> error

  ConfigSources sources() const {
    ConfigSources s;
    s.fixed_limits_file = "/etc/vgpu/limits";
    s.env = [this](const std::string& k) -> std::optional<std::string> {
      auto it = env.find(k);
      return it == env.end() ? std::nullopt : std::optional(it->second);
    };
    s.env_names = [this] {
      std::vector<std::string> names;
      for (const auto& kv : env)
        names.push_back(kv.first);
      return names;
    };
    s.exists = [this](const std::string& p) { return files.count(p) != 0; };
    s.read_file = [this](const std::string& p) -> Result<std::optional<std::string>> {
      if (auto u = unreadable.find(p); u != unreadable.end()) return Error{p + ": " + u->second};
      auto it = files.find(p);
      if (it == files.end()) return std::optional<std::string>();
      return std::optional(it->second);
    };
    return s;
  }
  Config load() const { return load_config(sources()); }
};

constexpr uint64_t GiB = 1ull << 30;
constexpr uint64_t MiB = 1ull << 20;

TEST(Config, NothingSetMeansPassThrough) {
  const Config c = Fake{}.load();
  EXPECT_FALSE(c.accounting_needed());
  EXPECT_EQ(c.state_file, "/tmp/cudevshr.cache");
  EXPECT_TRUE(c.errors.empty());
  for (int d = 0; d < kMaxDevices; ++d)
    EXPECT_EQ(c.sm_limit[d], 100u);
}

TEST(Config, StateFileAloneTurnsAccountingOn) {
  Fake f;
  f.env["CUDA_DEVICE_MEMORY_SHARED_CACHE"] = "/usr/local/vgpu/x.cache";
  const Config c = f.load();
  EXPECT_TRUE(c.accounting_needed());
  EXPECT_EQ(c.state_file, "/usr/local/vgpu/x.cache");
}

TEST(Config, EnvironmentGlobalAndPerDevice) {
  Fake f;
  f.env["CUDA_DEVICE_MEMORY_LIMIT"] = "4g";
  f.env["CUDA_DEVICE_MEMORY_LIMIT_1"] = "3000m";
  f.env["CUDA_DEVICE_SM_LIMIT"] = "30";
  f.env["CUDA_DEVICE_SM_LIMIT_2"] = "0";  // upstream: 0 means no limit
  f.env["CUDA_TASK_PRIORITY"] = "0";
  const Config c = f.load();
  EXPECT_TRUE(c.accounting_needed());
  EXPECT_EQ(c.memory_limit[0], 4 * GiB);
  EXPECT_EQ(c.memory_limit[1], 3000 * MiB);
  EXPECT_EQ(c.memory_limit[15], 4 * GiB);
  EXPECT_EQ(c.sm_limit[0], 30u);
  EXPECT_EQ(c.sm_limit[2], 100u);
  EXPECT_EQ(c.priority, 0);
  EXPECT_TRUE(c.errors.empty());
  EXPECT_TRUE(c.limits_file.empty());
}

TEST(Config, SizesAsUpstreamWritesThem) {
  for (auto [text, bytes] : std::vector<std::pair<const char*, uint64_t>>{{"4294967296", 4 * GiB},
                                                                          {"4G", 4 * GiB},
                                                                          {"4gi", 4 * GiB},
                                                                          {"4GiB", 4 * GiB},
                                                                          {"512k", 512 * 1024},
                                                                          {"010m", 10 * MiB},
                                                                          {" 7m ", 7 * MiB},
                                                                          {"1t", 1024 * GiB}}) {
    Fake f;
    f.env["CUDA_DEVICE_MEMORY_LIMIT_0"] = text;
    const Config c = f.load();
    EXPECT_EQ(c.memory_limit[0], bytes) << text;
    EXPECT_FALSE(c.memory_denied[0]) << text;
  }
}

TEST(Config, MalformedMemoryLimitRefusesThatDevice) {
  Fake f;
  f.env["CUDA_DEVICE_MEMORY_LIMIT"] = "2g";
  f.env["CUDA_DEVICE_MEMORY_LIMIT_3"] = "four gigs";
  const Config c = f.load();
  EXPECT_TRUE(c.memory_denied[3]);
  EXPECT_EQ(c.memory_limit[2], 2 * GiB);
  EXPECT_FALSE(c.memory_denied[2]);
  ASSERT_EQ(c.errors.size(), 1u);
  EXPECT_NE(c.errors[0].find("CUDA_DEVICE_MEMORY_LIMIT_3=four gigs"), std::string::npos)
      << c.errors[0];
  EXPECT_NE(c.errors[0].find("device 3 are refused"), std::string::npos) << c.errors[0];
}

TEST(Config, MalformedGlobalRefusesDevicesWithoutTheirOwn) {
  Fake f;
  f.env["CUDA_DEVICE_MEMORY_LIMIT"] = "12x";
  f.env["CUDA_DEVICE_MEMORY_LIMIT_0"] = "1g";
  const Config c = f.load();
  EXPECT_FALSE(c.memory_denied[0]);
  EXPECT_EQ(c.memory_limit[0], GiB);
  for (int d = 1; d < kMaxDevices; ++d)
    EXPECT_TRUE(c.memory_denied[d]) << d;
  ASSERT_FALSE(c.errors.empty());
  EXPECT_NE(c.errors[0].find("CUDA_DEVICE_MEMORY_LIMIT=12x"), std::string::npos);
}

TEST(Config, MalformedSmLimitMeansNoCapWithAnError) {
  Fake f;
  f.env["CUDA_DEVICE_SM_LIMIT"] = "150";
  const Config c = f.load();
  EXPECT_EQ(c.sm_limit[0], 100u);
  ASSERT_EQ(c.errors.size(), 1u);
  EXPECT_NE(c.errors[0].find("CUDA_DEVICE_SM_LIMIT=150"), std::string::npos);
}

TEST(Config, TheSustainRunLengthOfEarlierVersionsIsIgnoredWithAWarning) {
  Fake f;
  f.env["CUDA_DEVICE_SM_SUSTAIN_MS"] = "0";
  const Config c = f.load();
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_NE(c.warnings[0].find("CUDA_DEVICE_SM_SUSTAIN_MS is no longer used"), std::string::npos);
  EXPECT_TRUE(Fake{}.load().warnings.empty());
}

TEST(Config, LimitsFileGovernsOverEnvironment) {
  Fake f;
  f.files["/etc/vgpu/limits"] =
      "# written by the device "
      "plugin\nCUDA_DEVICE_MEMORY_LIMIT_0=3000m\n\nCUDA_DEVICE_SM_LIMIT=30\n";
  f.env["CUDA_DEVICE_MEMORY_LIMIT_0"] = "80g";  // a tenant trying to raise it
  f.env["CUDA_DEVICE_MEMORY_LIMIT"] = "80g";
  const Config c = f.load();
  EXPECT_EQ(c.limits_file, "/etc/vgpu/limits");
  EXPECT_EQ(c.memory_limit[0], 3000 * MiB);
  EXPECT_EQ(c.memory_limit[1], 0u);  // the file sets no global: the env's is ignored
  EXPECT_EQ(c.sm_limit[5], 30u);
  EXPECT_TRUE(c.accounting_needed());
  EXPECT_TRUE(c.errors.empty());
  ASSERT_FALSE(c.warnings.empty());
  EXPECT_NE(c.warnings[0].find("ignored"), std::string::npos);
}

TEST(Config, FixedFileBeatsTheVariableNamingAnother) {
  Fake f;
  f.files["/etc/vgpu/limits"] = "CUDA_DEVICE_MEMORY_LIMIT=1g\n";
  f.files["/tmp/mine"] = "CUDA_DEVICE_MEMORY_LIMIT=100g\n";
  f.env["VGPU_LIMITS_FILE"] = "/tmp/mine";
  const Config c = f.load();
  EXPECT_EQ(c.limits_file, "/etc/vgpu/limits");
  EXPECT_EQ(c.memory_limit[0], GiB);
}

TEST(Config, VariableNamesAFileWhenNoFixedOne) {
  Fake f;
  f.files["/tmp/limits"] = "CUDA_DEVICE_MEMORY_LIMIT=2g\n";
  f.env["VGPU_LIMITS_FILE"] = "/tmp/limits";
  const Config c = f.load();
  EXPECT_EQ(c.limits_file, "/tmp/limits");
  EXPECT_EQ(c.memory_limit[7], 2 * GiB);
}

TEST(Config, MissingNamedFileRefusesEverything) {
  Fake f;
  f.env["VGPU_LIMITS_FILE"] = "/tmp/nope";
  const Config c = f.load();
  for (int d = 0; d < kMaxDevices; ++d)
    EXPECT_TRUE(c.memory_denied[d]);
  ASSERT_FALSE(c.errors.empty());
  EXPECT_NE(c.errors[0].find("/tmp/nope"), std::string::npos);
}

TEST(Config, CorruptOrUnreadableFileRefusesEverything) {
  {
    Fake f;
    f.files["/etc/vgpu/limits"] = "CUDA_DEVICE_MEMORY_LIMIT=1g\nthis line is garbage\n";
    const Config c = f.load();
    for (int d = 0; d < kMaxDevices; ++d)
      EXPECT_TRUE(c.memory_denied[d]);
    ASSERT_GE(c.errors.size(), 2u);
    EXPECT_NE(c.errors[0].find("/etc/vgpu/limits:2"), std::string::npos) << c.errors[0];
  }
  {
    Fake f;
    f.unreadable["/etc/vgpu/limits"] = "Permission denied";
    const Config c = f.load();
    EXPECT_TRUE(c.memory_denied[0]);
    EXPECT_NE(c.errors[0].find("Permission denied"), std::string::npos);
  }
  {
    Fake f;
    f.files["/etc/vgpu/limits"] = std::string(70000, '#');
    EXPECT_TRUE(f.load().memory_denied[0]);
  }
}

TEST(Config, UnknownKeysInFileAreWarnings) {
  Fake f;
  // The MPS client's thread percentage is the plugin's note for the node
  // agent: known, left to the MPS server, no warning.
  f.files["/etc/vgpu/limits"] =
      "CUDA_DEVICE_MEMORY_LIMIT=1g\nSOMETHING_NEW=1\nCUDA_MPS_ACTIVE_THREAD_PERCENTAGE=30\n";
  const Config c = f.load();
  EXPECT_EQ(c.memory_limit[0], GiB);
  EXPECT_TRUE(c.errors.empty());
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_NE(c.warnings[0].find("SOMETHING_NEW"), std::string::npos);
}

// The limits file names the state file and the GPUs; the environment cannot
// point a process elsewhere once it does.
TEST(Config, LimitsFileNamesTheStateFileAndTheGpus) {
  Fake f;
  f.env["CUDA_DEVICE_MEMORY_SHARED_CACHE"] = "/tmp/mine.cache";
  f.files["/etc/vgpu/limits"] =
      "CUDA_DEVICE_MEMORY_LIMIT_0=1g\nCUDA_DEVICE_MEMORY_SHARED_CACHE=/usr/local/vgpu/a.cache\n"
      "VGPU_DEVICE_UUID_0=GPU-a\nVGPU_DEVICE_UUID_1=GPU-b\n";
  const Config c = f.load();
  EXPECT_EQ(c.state_file, "/usr/local/vgpu/a.cache");
  EXPECT_TRUE(c.state_file_from_limits);
  EXPECT_FALSE(c.state_file_from_env);
  EXPECT_EQ(c.device_uuids, (std::vector<std::string>{"GPU-a", "GPU-b"}));
  EXPECT_TRUE(c.errors.empty());
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_NE(c.warnings[0].find("/tmp/mine.cache in the environment is ignored"), std::string::npos)
      << c.warnings[0];
}

TEST(Config, UnusableStateFileOrUuidInTheLimitsFileRefuses) {
  for (const char* line : {"CUDA_DEVICE_MEMORY_SHARED_CACHE=relative.cache",
                           "VGPU_DEVICE_UUID_0=GPU a", "VGPU_DEVICE_UUID_0="}) {
    SCOPED_TRACE(line);
    Fake f;
    f.files["/etc/vgpu/limits"] = std::string("CUDA_DEVICE_MEMORY_LIMIT=1g\n") + line + "\n";
    const Config c = f.load();
    EXPECT_TRUE(c.memory_denied[0]);
    EXPECT_FALSE(c.errors.empty());
  }
}

// Without a limits file, the state file comes from the environment as upstream.
TEST(Config, WithoutALimitsFileTheEnvironmentNamesTheStateFile) {
  Fake f;
  f.env["CUDA_DEVICE_MEMORY_SHARED_CACHE"] = "/tmp/mine.cache";
  f.env["CUDA_DEVICE_MEMORY_LIMIT"] = "1g";
  const Config c = f.load();
  EXPECT_EQ(c.state_file, "/tmp/mine.cache");
  EXPECT_FALSE(c.state_file_from_limits);
  EXPECT_TRUE(c.device_uuids.empty());
}

TEST(Config, DeviceIndexOutOfRangeIsAnError) {
  Fake f;
  f.env["CUDA_DEVICE_MEMORY_LIMIT_99"] = "1g";
  f.env["CUDA_DEVICE_SM_LIMIT_16"] = "30";
  f.env["CUDA_DEVICE_MEMORY_LIMIT_GPU0"] = "1g";
  const Config c = f.load();
  ASSERT_EQ(c.errors.size(), 3u);
  EXPECT_NE(c.errors[0].find("device index 99 is out of range (0-15)"), std::string::npos);
  EXPECT_NE(c.errors[1].find("'GPU0' is not a device index"), std::string::npos);
  EXPECT_NE(c.errors[2].find("CUDA_DEVICE_SM_LIMIT_16=30: device index 16 is out of range"),
            std::string::npos)
      << c.errors[2];
  for (int d = 0; d < kMaxDevices; ++d)
    EXPECT_FALSE(c.has_memory_limit(d));
  // In the limits file too.
  Fake g;
  g.files["/etc/vgpu/limits"] = "CUDA_DEVICE_MEMORY_LIMIT_16=1g\n";
  const Config d = g.load();
  ASSERT_EQ(d.errors.size(), 1u);
  EXPECT_NE(d.errors[0].find("/etc/vgpu/limits:1: CUDA_DEVICE_MEMORY_LIMIT_16: device index 16"),
            std::string::npos)
      << d.errors[0];
}

TEST(Config, ControlFileIsTheMountedOneElseTheVariable) {
  Fake f;
  EXPECT_EQ(f.load().control_file, "");
  f.env["VGPU_CONTROL_FILE"] = "/tmp/control";
  EXPECT_EQ(f.load().control_file, "/tmp/control");
  f.files["/etc/vgpu/control"] = "";
  EXPECT_EQ(f.load().control_file, "/etc/vgpu/control");
}

TEST(Config, OversubscribeIsOffUnlessTrue) {
  EXPECT_FALSE(Fake{}.load().oversubscribe);
  for (const char* on : {"true", "1"}) {
    Fake f;
    f.env["CUDA_OVERSUBSCRIBE"] = on;
    const Config c = f.load();
    EXPECT_TRUE(c.oversubscribe) << on;
    EXPECT_TRUE(c.errors.empty());
  }
  for (const char* off : {"false", "0", ""}) {
    Fake f;
    f.env["CUDA_OVERSUBSCRIBE"] = off;
    const Config c = f.load();
    EXPECT_FALSE(c.oversubscribe) << off;
    EXPECT_TRUE(c.errors.empty()) << off;
  }
}

TEST(Config, UnreadableOversubscribeStaysOffAndSaysWhy) {
  Fake f;
  f.env["CUDA_OVERSUBSCRIBE"] = "yes please";
  const Config c = f.load();
  EXPECT_FALSE(c.oversubscribe);
  ASSERT_EQ(c.errors.size(), 1u);
  EXPECT_NE(c.errors[0].find("CUDA_OVERSUBSCRIBE=yes please is not true or false"),
            std::string::npos)
      << c.errors[0];
}

TEST(Config, OversubscribeFromTheLimitsFileWinsOverTheEnvironment) {
  Fake f;
  f.files["/etc/vgpu/limits"] = "CUDA_DEVICE_MEMORY_LIMIT=8g\nCUDA_OVERSUBSCRIBE=false\n";
  f.env["CUDA_OVERSUBSCRIBE"] = "true";
  EXPECT_FALSE(f.load().oversubscribe);
  f.files["/etc/vgpu/limits"] = "CUDA_DEVICE_MEMORY_LIMIT=8g\n";
  const Config c = f.load();
  EXPECT_TRUE(c.oversubscribe);  // the device plugin's environment variable
  EXPECT_TRUE(c.warnings.empty()) << c.warnings[0];
}

}  // namespace
}  // namespace hami::vgpu
