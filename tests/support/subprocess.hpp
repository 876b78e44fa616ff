#pragma once
// Runs a program to completion and captures its exit code, stdout and stderr.
// Tests use it to drive the real `vgpu` binary as a user would.
//
//   auto r = hami::test::run_process({VGPU_BINARY, "inspect", path});
//   EXPECT_EQ(r.exit_code, 0);

#include <string>
#include <vector>

namespace hami::test {

struct ProcessResult {
  int exit_code = -1;  // 128 + signal when killed by one
  std::string out;
  std::string err;
};

ProcessResult run_process(const std::vector<std::string>& argv);

}  // namespace hami::test
