#pragma once
// ContainerFiles: the node agent's view of the containers' state files, in
// upstream HAMi's host layout <root>/containers/<podUID>_<containerName>/*.cache
// (the device plugin's Allocate creates the directory and mounts it into the
// container). Each scan lists the directories and reads every state file with
// region::read_snapshot: pread, never mmap, so a tenant truncating its own file
// cannot SIGBUS the agent, and nothing is ever written to a file that is not
// valid.
//
// One state file per container: the one the device plugin's record names
// (<root>/limits/<dir>, trusted_record.hpp), or, without a record, the first
// of the directory's *.cache files (name order) that reads well. What is read
// is bounded whatever a tenant puts in its directory: at most
// `files_per_container` files tried and `entries_per_directory` names listed
// per container, at most `containers` containers in all; anything beyond is
// logged once and counted, never read.
//
// Problems (a directory name that is not <podUID>_<name>, a symbolic link, a
// file truncated, half-written, foreign or unreadable, a record that is not
// trusted, more state files than one) are logged once per file, again only
// when the reason changes, and the file is simply skipped until it reads
// well; a file that vanishes is dropped.
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

#include "monitor/trusted_record.hpp"
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
  std::optional<TrustedRecord> record;  // the device plugin's, when there is one
  std::string control_path;             // <root>/control/<dir>; may not exist
  // An MPS client's thread percentage (100: no cap): the record's, or for a
  // standalone `vgpu run --sharing mps` job its directory's kMpsClientFile.
  std::optional<uint64_t> mps_thread_percentage;
};

// A container the device plugin allocated whose processes have made no state
// file (yet, or ever: a program that does not load the library). Its pod is
// still checked against NVML.
struct UnstartedContainer {
  ContainerRef ref;
  TrustedRecord record;
};

struct ScanLimits {
  size_t containers = 4096;            // containers read per scan
  size_t files_per_container = 4;      // *.cache files tried per container
  size_t entries_per_directory = 256;  // names listed per container directory
};

class ContainerFiles {
 public:
  // `root` holds the containers/ directory (upstream: /usr/local/vgpu).
  explicit ContainerFiles(std::string root, ScanLimits limits = {});

  // Every state file that reads well, in path order.
  std::vector<ContainerState> scan();

  // Files (or directories) skipped by the last scan, with the reason.
  const std::map<std::string, std::string>& problems() const { return problems_; }
  // How many problem lines have been logged so far.
  uint64_t problems_logged() const { return problems_logged_; }
  // Containers left unread by the last scan (beyond ScanLimits::containers).
  size_t skipped_containers() const { return skipped_; }
  // Containers of the last scan with a record but no state file.
  const std::vector<UnstartedContainer>& unstarted() const { return unstarted_; }

 private:
  // `skipped`: the file is not read until the reason goes away (the log says so).
  void note_problem(std::map<std::string, std::string>& now, const std::string& path,
                    std::string reason, bool skipped = true);

  // A standalone job's kMpsClientFile; nullopt when absent or unreadable.
  std::optional<uint64_t> read_mps_client_file(const std::string& path,
                                               std::map<std::string, std::string>& now);
  // The state file of one container directory, or nullopt.
  std::optional<ContainerState> read_container(const std::string& dir_name, const ContainerRef& ref,
                                               std::map<std::string, std::string>& now);

  std::string root_;
  ScanLimits limits_;
  size_t skipped_ = 0;
  std::vector<UnstartedContainer> unstarted_;
  bool skipped_logged_ = false;
  std::map<std::string, std::string> problems_;
  uint64_t problems_logged_ = 0;
  bool root_missing_logged_ = false;
};

}  // namespace hami::monitor
