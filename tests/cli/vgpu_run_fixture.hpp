#pragma once
// `vgpu run` as a real process against the simulated GPUs, under a state root
// of the test's own: the environment it runs in and its command line.
//
//   class MyTest : public test::VgpuRunFixture {};
//   auto r = test::run_process(run({"--memory", "1g"}, {"env"}), env());

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"

namespace hami::test {

class VgpuRunFixture : public ::testing::Test {
 protected:
  Env env() const {
    return {{"LD_LIBRARY_PATH", SIMGPU_LIB_DIR},
            {"SIMGPU_STATE", root_.file("gpu.state")},
            {"SIMGPU_CONTEXT_SIZE", "0"},
            {"ASAN_OPTIONS", "verify_asan_link_order=0:detect_leaks=0"},
            {"CUDA_VISIBLE_DEVICES", kUnset},
            {"LD_PRELOAD", kUnset}};
  }
  std::vector<std::string> run(std::vector<std::string> opts, std::vector<std::string> cmd) const {
    std::vector<std::string> argv = {
        VGPU_BINARY, "run",   "--hook-path",    root_.path(),
        "--library", LIBVGPU, "--nvml-library", std::string(SIMGPU_LIB_DIR) + "/libnvidia-ml.so.1"};
    argv.insert(argv.end(), opts.begin(), opts.end());
    argv.push_back("--");
    argv.insert(argv.end(), cmd.begin(), cmd.end());
    return argv;
  }
  TempDir root_;
};

}  // namespace hami::test
