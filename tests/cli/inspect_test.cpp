// `vgpu inspect` as a user runs it: the real binary, real files, exit codes.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/inspect.hpp"
#include "region/pace_clocks.hpp"
#include "region/region.hpp"
#include "support/fixtures.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"

namespace hami::cli {
namespace {

using nlohmann::json;
using test::run_process;

size_t count_lines(const std::string& s) {
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
}

class InspectTest : public ::testing::Test {
 protected:
  std::string fixture_copy() {
    const std::string path = dir_.file("upstream.cache");
    test::write_file(path, test::read_gzip_fixture("hami-core-v1.2-one-process.cache.gz"));
    return path;
  }
  test::TempDir dir_;
};

TEST_F(InspectTest, FixtureAsText) {
  const std::string path = fixture_copy();
  auto r = run_process({VGPU_BINARY, "inspect", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const std::string& o = r.out;
  EXPECT_NE(o.find("State file  " + path), std::string::npos) << o;
  EXPECT_NE(o.find("version 1.2, 2008953 bytes"), std::string::npos) << o;
  EXPECT_NE(o.find("utilization_switch=1  recent_kernel=2  priority=0 (high)"), std::string::npos);
  EXPECT_NE(o.find("Last kernel 2026-11-21T21:30:31Z"), std::string::npos) << o;
  EXPECT_NE(o.find("GPU-90496d2f-68cf-ad72-f361-08e59367de69  4 GiB         30%       1.63 GiB"),
            std::string::npos)
      << o;
  EXPECT_NE(o.find("Device indices 1-15 are not present; their limits: memory 4 GiB, SM 30%."),
            std::string::npos)
      << o;
  EXPECT_NE(o.find("1 slot in use (proc_num 1)"), std::string::npos);
  // slot, pid, host pid, status, owner (upstream slot: no lock), dev, used, ctx, data, nvml, sm
  EXPECT_NE(
      o.find("0     620  620       running  -      0    1.63 GiB  518 MiB  1.13 GiB  1.72 GiB   3"),
      std::string::npos)
      << o;
}

TEST_F(InspectTest, FixtureAsJson) {
  auto r = run_process({VGPU_BINARY, "inspect", fixture_copy(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["layout"], "v1");
  EXPECT_EQ(j["version"]["major"], 1);
  EXPECT_EQ(j["version"]["minor"], 2);
  EXPECT_EQ(j["file_size"], 2008953);
  EXPECT_EQ(j["device_num"], 1);
  EXPECT_EQ(j["flags"]["priority"], 0);
  EXPECT_EQ(j["flags"]["utilization_switch"], 1);
  EXPECT_EQ(j["flags"]["recent_kernel"], 2);
  EXPECT_EQ(j["flags"]["last_kernel_time"], 1795296631);
  ASSERT_EQ(j["limits"].size(), 16u);
  EXPECT_EQ(j["limits"][15]["memory_limit_bytes"], 4294967296ull);
  EXPECT_EQ(j["limits"][15]["sm_limit_percent"], 30);
  ASSERT_EQ(j["devices"].size(), 1u);
  EXPECT_EQ(j["devices"][0]["uuid"], "GPU-90496d2f-68cf-ad72-f361-08e59367de69");
  EXPECT_EQ(j["devices"][0]["used_bytes"], 1753351168);
  ASSERT_EQ(j["processes"].size(), 1u);
  const json& p = j["processes"][0];
  EXPECT_EQ(p["slot"], 0);
  EXPECT_EQ(p["pid"], 620);
  EXPECT_EQ(p["host_pid"], 620);
  EXPECT_EQ(p["status"], "running");
  EXPECT_EQ(p["liveness"], "unknown");
  EXPECT_EQ(p["owner_tagged"], false);
  ASSERT_EQ(p["devices"].size(), 1u);
  EXPECT_EQ(p["devices"][0]["context_bytes"], 543162368);
  EXPECT_EQ(p["devices"][0]["data_bytes"], 1210188800);
  EXPECT_EQ(p["devices"][0]["spilled_bytes"], 0);  // upstream's unused[0]
  EXPECT_EQ(p["devices"][0]["total_bytes"], 1753351168);
  EXPECT_EQ(p["devices"][0]["nvml_used_bytes"], 1851785216);
  EXPECT_EQ(p["devices"][0]["sm_util_percent"], 3);
  EXPECT_TRUE(j["warnings"].empty());
}

TEST_F(InspectTest, UsageErrorsExitTwo) {
  auto none = run_process({VGPU_BINARY});
  EXPECT_EQ(none.exit_code, 2);
  auto no_file = run_process({VGPU_BINARY, "inspect"});
  EXPECT_EQ(no_file.exit_code, 2);
  EXPECT_NE(no_file.err.find("FILE"), std::string::npos) << no_file.err;
  auto bad_flag = run_process({VGPU_BINARY, "inspect", "--bogus", "x"});
  EXPECT_EQ(bad_flag.exit_code, 2);
  auto bad_cmd = run_process({VGPU_BINARY, "frobnicate"});
  EXPECT_EQ(bad_cmd.exit_code, 2);
  auto help = run_process({VGPU_BINARY, "inspect", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--json"), std::string::npos);
  auto version = run_process({VGPU_BINARY, "--version"});
  EXPECT_EQ(version.exit_code, 0);
}

TEST_F(InspectTest, BadFilesExitThreeWithOneLine) {
  const std::string missing = dir_.file("missing.cache");
  auto r = run_process({VGPU_BINARY, "inspect", missing});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(count_lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find(missing), std::string::npos);
  EXPECT_NE(r.err.find("No such file"), std::string::npos);

  const std::string junk = dir_.file("junk.cache");
  test::write_file(junk, std::vector<std::byte>(2008953, std::byte{0x41}));
  auto j = run_process({VGPU_BINARY, "inspect", junk, "--json"});
  EXPECT_EQ(j.exit_code, 3);
  EXPECT_EQ(count_lines(j.err), 1u) << j.err;
  EXPECT_NE(j.err.find("wrong magic 0x41414141"), std::string::npos) << j.err;

  auto d = run_process({VGPU_BINARY, "inspect", dir_.path()});
  EXPECT_EQ(d.exit_code, 3);
  EXPECT_NE(d.err.find("not a regular file"), std::string::npos) << d.err;
}

// The sample writer's processes as inspect sees them: two live owners, one killed.
TEST_F(InspectTest, ShowsLiveAndDeadOwners) {
  const std::string path = dir_.file("sample.cache");
  const std::string ready = dir_.file("ready");
  pid_t writer = ::fork();
  if (writer == 0) {
    ::execl(SAMPLE_BINARY, SAMPLE_BINARY, path.c_str(), "--ready-file", ready.c_str(), nullptr);
    _exit(127);
  }
  for (int i = 0; i < 1000 && !std::filesystem::exists(ready); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(std::filesystem::exists(ready));
  auto r = run_process({VGPU_BINARY, "inspect", path, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j["processes"].size(), 3u);
  int alive = 0, dead = 0;  // workers race for slots, so count rather than index
  for (const json& p : j["processes"]) {
    alive += p["liveness"] == "alive";
    dead += p["liveness"] == "dead";
    EXPECT_EQ(p["status"], "running");
  }
  EXPECT_EQ(alive, 2);
  EXPECT_EQ(dead, 1);
  EXPECT_EQ(j["devices"][0]["used_bytes"], (300ull + 1024 + 300 + 512) << 20);
  EXPECT_EQ(j["devices"][1]["used_bytes"], (300ull + 2048) << 20);

  auto text = run_process({VGPU_BINARY, "inspect", path});
  EXPECT_NE(text.out.find("alive"), std::string::npos);
  EXPECT_NE(text.out.find("dead"), std::string::npos);

  ::kill(writer, SIGTERM);
  int status = 0;
  ::waitpid(writer, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  auto after = run_process({VGPU_BINARY, "inspect", path, "--json"});
  const json a = json::parse(after.out);
  ASSERT_EQ(a["processes"].size(), 1u);  // live owners released; the dead one awaits a sweep
  EXPECT_EQ(a["processes"][0]["liveness"], "dead");
}

// Rendering never trusts the file: arbitrary bytes in UUIDs stay valid JSON.
TEST(InspectRender, SanitisesUuids) {
  std::vector<std::byte> bytes(2008953, std::byte{0});
  const int32_t magic = region::kMagic;
  const uint32_t ver[2] = {1, 2};
  std::memcpy(bytes.data(), &magic, 4);
  std::memcpy(bytes.data() + 4, ver, 8);
  const uint64_t n = 1;
  std::memcpy(bytes.data() + 56, &n, 8);
  const unsigned char uuid[] = {'G', 'P', 'U', 0xff, 0xc3, '\n'};
  std::memcpy(bytes.data() + 64, uuid, sizeof uuid);
  auto snap = region::parse_region(bytes, "x");
  ASSERT_TRUE(snap);
  EXPECT_EQ(snap->uuids[0], "GPU???");
  EXPECT_EQ(snap->warnings.size(), 1u);
  EXPECT_NO_THROW((void)render_inspect_json(*snap).dump());
  EXPECT_NE(render_inspect_text(*snap, 0).find("Warning     device UUIDs"), std::string::npos);
}

// Where the container's SM share stands: the .pace file beside the state file.
TEST_F(InspectTest, ShowsTheSmPacingOfAContainerWithAShare) {
  const std::string path = dir_.file("c.cache");
  region::OpenOptions opt;
  opt.initial.sm_limit[0] = 30;
  ASSERT_TRUE(region::Region::open(path, opt));

  auto r = run_process({VGPU_BINARY, "inspect", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("SM pacing   no " + path + ".pace yet: no process has paced"),
            std::string::npos)
      << r.out;

  {
    auto clocks = region::PaceClocks::open(path + ".pace");
    ASSERT_TRUE(clocks) << clocks.error().message;
    *clocks->clock(0) = region::pace_clock_now_ns() + 30'000'000'000;  // 30 s of admitted work
  }
  r = run_process({VGPU_BINARY, "inspect", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string line = "  device 0: at its share, launches wait (admitted work reaches ";
  const size_t at = r.out.find(line);
  ASSERT_NE(at, std::string::npos) << r.out;
  const double ahead = std::stod(r.out.substr(at + line.size()));
  EXPECT_GT(ahead, 25.0);
  EXPECT_LE(ahead, 30.0);
  EXPECT_EQ(r.out.find("  device 1:"), std::string::npos) << "device 1 has no share";
  EXPECT_EQ(r.out.find("  device 2:"), std::string::npos);

  r = run_process({VGPU_BINARY, "inspect", "--json", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out)["sm_pacing"];
  EXPECT_EQ(j["path"], path + ".pace");
  EXPECT_EQ(j["present"], true);
  EXPECT_EQ(j["this_boot"], true);
  ASSERT_EQ(j["devices"].size(), 1u) << j.dump();
  EXPECT_EQ(j["devices"][0]["index"], 0);
  EXPECT_GT(j["devices"][0]["backlog_ns"].get<int64_t>(), 25'000'000'000);

  // A file that is not ours is reported; the state file is still shown.
  std::ofstream(path + ".pace", std::ios::trunc) << std::string(100, 'x');
  r = run_process({VGPU_BINARY, "inspect", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("SM pacing   " + path + ".pace: has 100 bytes, not the 1088"),
            std::string::npos)
      << r.out;
}

TEST_F(InspectTest, NoSmPacingLineWithoutAShare) {
  const std::string path = dir_.file("c.cache");
  ASSERT_TRUE(region::Region::open(path, region::OpenOptions{}));
  const auto r = run_process({VGPU_BINARY, "inspect", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("SM pacing"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace hami::cli
