#pragma once
// `vgpu inspect FILE [--json]`: what a state file holds, for operators and
// scripts, and where the container's SM share stands (its .pace file). Rendering is separate from
// I/O so tests and the fuzz target can feed any snapshot.
//
//   auto snap = hami::region::read_snapshot(path);
//   std::cout << hami::cli::render_inspect_text(*snap, std::time(nullptr));

#include <cstdint>
#include <ctime>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "region/pace_clocks.hpp"
#include "region/snapshot.hpp"

namespace hami::cli {

// The SM pace clocks beside a state file (`<state file>.pace`), as read by
// run_inspect: where the container's SM share stands now.
struct PaceInfo {
  std::string path;
  std::optional<region::PaceSnapshot> snap;  // std::nullopt: no file
  std::string error;                         // not empty: the file could not be used
  int64_t now_mono_ns = 0;                   // CLOCK_MONOTONIC when it was read
};
PaceInfo read_pace_info(const std::string& state_path);

std::string render_inspect_text(const region::RegionSnapshot& snap, std::time_t now,
                                const PaceInfo* pace = nullptr);
nlohmann::json render_inspect_json(const region::RegionSnapshot& snap,
                                   const PaceInfo* pace = nullptr);

// Exit codes of `vgpu inspect`.
inline constexpr int kExitOk = 0;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitBadFile = 3;

// Runs the command: prints to stdout, a one-line reason to stderr on failure.
int run_inspect(const std::string& path, bool json);

}  // namespace hami::cli
