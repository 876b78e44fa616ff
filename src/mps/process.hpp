#pragma once
// Runs one short-lived program to completion for the MPS control code: given
// argv, environment overrides and the text to feed its stdin, returns its exit
// status and its stdout and stderr together, killing it at a deadline. A child
// that daemonises may keep the output pipe open after it exits, so reading
// stops when the program itself has exited and the pipe has nothing more.
// posix_spawn, so it is safe in a multi-threaded daemon.
//
//   auto r = hami::mps::run_program({"/usr/bin/nvidia-cuda-mps-control"},
//                                   {{"CUDA_MPS_PIPE_DIRECTORY", "/run/mps"}},
//                                   "get_server_list\n", std::chrono::seconds(5));
//   if (r && r->exit_code == 0) use(r->output);

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "common/result.hpp"

namespace hami::mps {

struct ProgramResult {
  int exit_code = -1;  // 128 + signal number when a signal ended it
  std::string output;  // stdout and stderr interleaved, at most 64 KiB
};

using EnvOverrides = std::vector<std::pair<std::string, std::string>>;

// An error only when the program could not be started or did not exit by
// `timeout` (it is then killed); a non-zero exit is a result.
Result<ProgramResult> run_program(const std::vector<std::string>& argv, const EnvOverrides& env,
                                  const std::string& stdin_text, std::chrono::milliseconds timeout);

}  // namespace hami::mps
