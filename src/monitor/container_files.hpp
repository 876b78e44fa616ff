#pragma once
// ContainerFiles: the node agent's view of the containers' state files, in
// upstream HAMi's host layout <root>/containers/<podUID>_<containerName>/*.cache
// (the device plugin's Allocate creates the directory and mounts it into the
// container). Each scan lists the directories and reads every state file with
// region::read_snapshot: pread, never mmap, so a tenant truncating its own file
// cannot SIGBUS the agent, and nothing is ever written to a file that is not
// valid.
//
// Problems (a directory name that is not <podUID>_<name>, a symbolic link, a
// file truncated, half-written, foreign or unreadable) are logged once per
// file, again only when the reason changes, and the file is simply skipped
// until it reads well; a file that vanishes is dropped.
//
//   ContainerFiles files("/usr/local/vgpu");
//   for (const ContainerState& c : files.scan())
//     std::printf("%s/%s: %zu slots\n", c.ref.pod_uid.c_str(), c.ref.container.c_str(),
//                 c.snapshot.slots.size());

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "region/snapshot.hpp"

namespace hami::monitor {

struct ContainerRef {
  std::string pod_uid;
  std::string container;
  bool operator==(const ContainerRef&) const = default;
};

// "<podUID>_<containerName>", split at the first '_' (pod UIDs contain no '_');
// nullopt when either part is empty.
std::optional<ContainerRef> parse_container_dir(std::string_view name);

struct ContainerState {
  ContainerRef ref;
  std::string path;
  region::RegionSnapshot snapshot;
};

class ContainerFiles {
 public:
  // `root` holds the containers/ directory (upstream: /usr/local/vgpu).
  explicit ContainerFiles(std::string root);

  // Every state file that reads well, in path order.
  std::vector<ContainerState> scan();

  // Files (or directories) skipped by the last scan, with the reason.
  const std::map<std::string, std::string>& problems() const { return problems_; }
  // How many problem lines have been logged so far.
  uint64_t problems_logged() const { return problems_logged_; }

 private:
  void note_problem(std::map<std::string, std::string>& now, const std::string& path,
                    std::string reason);

  std::string root_;
  std::map<std::string, std::string> problems_;
  uint64_t problems_logged_ = 0;
  bool root_missing_logged_ = false;
};

}  // namespace hami::monitor
