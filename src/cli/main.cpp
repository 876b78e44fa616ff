// vgpu: the command-line tool of HAMi in C++. Subcommands:
//   inspect FILE [--json]   show what a per-container state file holds
#include <CLI/CLI.hpp>

#include <iostream>
#include <string>

#include "cli/inspect.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "vgpu: GPU sharing tools (HAMi-compatible).\n"
      "Exit codes: 0 ok, 2 usage error, 3 invalid or unreadable file."};
  app.set_version_flag("--version", std::string(HAMI_VERSION));
  app.require_subcommand(1);

  std::string file;
  bool json = false;
  CLI::App* inspect = app.add_subcommand(
      "inspect", "Show the limits, devices and process slots of a state file (*.cache)");
  inspect->add_option("FILE", file, "State file, e.g. /usr/local/vgpu/<id>.cache")->required();
  inspect->add_flag("--json", json, "Machine-readable output");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);  // prints help, version or the usage error
    return rc == 0 ? 0 : hami::cli::kExitUsage;
  }
  if (inspect->parsed()) return hami::cli::run_inspect(file, json);
  return hami::cli::kExitUsage;
}
