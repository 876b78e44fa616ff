#pragma once
// The directories `vgpu run` makes and removes under its state root, without
// ever following a symbolic link it did not create: the root's containers/
// directory, and one job directory per command (named as the device plugin
// names a container's, <id>_<name>). Everything below the root is opened with
// O_NOFOLLOW relative to a descriptor already held, so a link planted by
// someone who can write there (another user in /tmp, the job itself in its
// own directory) is refused or removed as a link, never followed.
//
//   auto root = open_state_root("/run/user/1000/vgpu", RootOwner::kMe);
//   auto job = make_job_dir(*root, "train");          // containers/local-…_train, mode 0777
//   Region::open(job->path() + "/vgpu.cache", ...);
//   remove_job_dir(*root, *job);                      // contents and all, links as links

#include <string>
#include <string_view>

#include "common/result.hpp"
#include "common/unique_fd.hpp"

namespace hami::cli {

enum class RootOwner {
  kAny,  // given by the user (--hook-path) or the system's /usr/local/vgpu
  kMe,   // a per-user default: must be ours and writable by nobody else
};

struct StateRoot {
  std::string path;     // as given
  UniqueFd containers;  // <path>/containers
};

// Opens (creating when missing, mode 0755) <path> and <path>/containers.
// With RootOwner::kMe both must be directories of this user that group and
// others cannot write; containers/ must never be a symbolic link.
Result<StateRoot> open_state_root(const std::string& path, RootOwner owner);

// 1-63 of [A-Za-z0-9._-], not starting with '.' or '-': a single path
// component, never "..", and a valid container-name-like label.
bool valid_job_name(std::string_view name);

struct JobDir {
  std::string name;  // <id>_<name>, under containers/
  UniqueFd fd;       // the directory made, whatever it is renamed to later
  std::string containers_path;
  // A path to the directory that does not go through names others may change.
  std::string path() const;
  // Its path by name, for the command's environment.
  std::string named_path() const { return containers_path + "/" + name; }
};

// Makes containers/<id>_<name> with a fresh random id (mode 0777: the command
// may run as another user).
Result<JobDir> make_job_dir(const StateRoot& root, const std::string& name);

// Removes the job directory and everything in it; links are removed as links,
// directories deeper than 32 levels are left (and said so). Only removes the
// name if it still is the directory made.
Result<void> remove_job_dir(const StateRoot& root, const JobDir& job);

}  // namespace hami::cli
