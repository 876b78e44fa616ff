#pragma once
// `vgpu inspect FILE [--json]`: what a state file holds, for operators and
// scripts. Rendering is separate from I/O so tests and the fuzz target can feed
// any snapshot.
//
//   auto snap = hami::region::read_snapshot(path);
//   std::cout << hami::cli::render_inspect_text(*snap, std::time(nullptr));

#include <ctime>
#include <string>

#include <nlohmann/json.hpp>

#include "region/snapshot.hpp"

namespace hami::cli {

std::string render_inspect_text(const region::RegionSnapshot& snap, std::time_t now);
nlohmann::json render_inspect_json(const region::RegionSnapshot& snap);

// Exit codes of `vgpu inspect`.
inline constexpr int kExitOk = 0;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitBadFile = 3;

// Runs the command: prints to stdout, a one-line reason to stderr on failure.
int run_inspect(const std::string& path, bool json);

}  // namespace hami::cli
