#include "monitor/container_files.hpp"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "common/log.hpp"
#include "common/small_file.hpp"

namespace hami::monitor {

namespace {

// Up to `max` names in a directory, sorted; *more when there were more.
// Empty (and *err set) when it cannot be read.
std::vector<std::string> list_dir(const std::string& path, int* err, size_t max = SIZE_MAX,
                                  bool* more = nullptr) {
  std::vector<std::string> names;
  *err = 0;
  if (more != nullptr) *more = false;
  DIR* d = ::opendir(path.c_str());
  if (d == nullptr) {
    *err = errno;
    return names;
  }
  while (const dirent* e = ::readdir(d)) {
    const std::string_view n = e->d_name;
    if (n == "." || n == "..") continue;
    if (names.size() >= max) {
      if (more != nullptr) *more = true;
      break;
    }
    names.emplace_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

std::optional<ContainerRef> parse_container_dir(std::string_view name) {
  const size_t cut = name.find('_');
  if (cut == std::string_view::npos || cut == 0 || cut + 1 == name.size()) return std::nullopt;
  return ContainerRef{std::string(name.substr(0, cut)), std::string(name.substr(cut + 1))};
}

ContainerFiles::ContainerFiles(std::string root, ScanLimits limits)
    : root_(std::move(root)), limits_(limits) {}

void ContainerFiles::note_problem(std::map<std::string, std::string>& now, const std::string& path,
                                  std::string reason, bool skipped) {
  auto old = problems_.find(path);
  if (old == problems_.end() || old->second != reason) {
    log::warn("%s: %s%s", path.c_str(), reason.c_str(),
              skipped ? "; skipped until it reads well" : "");
    ++problems_logged_;
  }
  now[path] = std::move(reason);
}

std::optional<uint64_t> ContainerFiles::read_mps_client_file(
    const std::string& path, std::map<std::string, std::string>& now) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return std::nullopt;  // not an MPS job
  // The job's directory is its own: never follow a link out of it.
  if (!S_ISREG(st.st_mode)) {
    note_problem(now, path, "not a regular file", /*skipped=*/false);
    return std::nullopt;
  }
  auto text = read_small_file(path, 4096);
  if (!text) {
    if (text.error().sys_errno != ENOENT) note_problem(now, path, text.error().message, false);
    return std::nullopt;
  }
  auto pct = parse_mps_thread_percentage(*text);
  if (!pct) {
    note_problem(now, path, pct.error().message, /*skipped=*/false);
    return std::nullopt;
  }
  return *pct;
}

std::optional<ContainerState> ContainerFiles::read_container(
    const std::string& dir, const ContainerRef& ref, std::map<std::string, std::string>& now) {
  const std::string dir_path = root_ + "/containers/" + dir;
  ContainerState c{ref, {}, {}, std::nullopt, root_ + "/control/" + dir};
  auto rec = read_trusted_record(root_ + "/limits/" + dir);
  if (!rec) {
    note_problem(now, root_ + "/limits/" + dir, rec.error().message);
  } else {
    c.record = std::move(*rec);
  }

  // The files to try, in order: the one the plugin named, or the directory's.
  std::vector<std::string> candidates;
  if (c.record && !c.record->state_file_name.empty()) {
    candidates.push_back(c.record->state_file_name);
  } else {
    int err = 0;
    bool more = false;
    const std::vector<std::string> names =
        list_dir(dir_path, &err, limits_.entries_per_directory, &more);
    if (err != 0) {
      note_problem(now, dir_path, std::string("cannot list: ") + std::strerror(err));
      return std::nullopt;
    }
    if (more) {
      note_problem(now, dir_path,
                   "more than " + std::to_string(limits_.entries_per_directory) +
                       " entries; only the first ones listed are looked at",
                   /*skipped=*/false);
    }
    for (const std::string& n : names) {
      if (ends_with(n, ".cache")) candidates.push_back(n);
    }
  }

  size_t tried = 0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const std::string path = dir_path + "/" + candidates[i];
    if (c.snapshot.layout != nullptr || tried == limits_.files_per_container) {
      // One set of series per container: the rest are named, never read.
      note_problem(now, dir_path + "/*.cache",
                   "more state files than " +
                       (c.snapshot.layout != nullptr ? c.path : std::string("those tried")) +
                       "; one state file per container is read",
                   /*skipped=*/false);
      break;
    }
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) continue;  // vanished since the listing
    ++tried;
    if (S_ISLNK(st.st_mode)) {
      // The directory is the tenant's: a link could point anywhere on the host.
      note_problem(now, path, "a symbolic link, not followed");
      continue;
    }
    if (!S_ISREG(st.st_mode)) {
      note_problem(now, path, "not a regular file");
      continue;
    }
    auto snap = region::read_snapshot(path);
    if (!snap) {
      if (snap.error().sys_errno == ENOENT) continue;  // vanished while we read
      // The reader's messages start with the path; the log line adds it once.
      std::string why = snap.error().message;
      if (why.rfind(path + ": ", 0) == 0) why.erase(0, path.size() + 2);
      note_problem(now, path, std::move(why));
      continue;
    }
    if (problems_.count(path) != 0) log::info("%s: reads well now", path.c_str());
    c.path = path;
    c.snapshot = std::move(*snap);
  }
  if (c.record) {
    c.mps_thread_percentage = c.record->mps_thread_percentage;
  } else if (c.snapshot.layout != nullptr) {
    c.mps_thread_percentage = read_mps_client_file(dir_path + "/" + kMpsClientFile, now);
  }
  if (c.snapshot.layout == nullptr) {
    if (c.record && !c.record->gpu_uuids.empty())
      unstarted_.push_back(UnstartedContainer{ref, std::move(*c.record)});
    return std::nullopt;
  }
  return c;
}

std::vector<ContainerState> ContainerFiles::scan() {
  std::vector<ContainerState> found;
  std::map<std::string, std::string> now;
  const std::string containers = root_ + "/containers";
  int err = 0;
  const std::vector<std::string> dirs = list_dir(containers, &err);
  skipped_ = 0;
  unstarted_.clear();
  if (err != 0) {
    // No containers yet is normal on a fresh node; say so once.
    if (!root_missing_logged_) {
      log::info("%s: %s; no containers to watch yet", containers.c_str(), std::strerror(err));
      root_missing_logged_ = true;
    }
    problems_.clear();
    return found;
  }
  root_missing_logged_ = false;
  for (const std::string& dir : dirs) {
    const std::string dir_path = containers + "/" + dir;
    struct stat st;
    if (::lstat(dir_path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    const std::optional<ContainerRef> ref = parse_container_dir(dir);
    if (!ref) {
      note_problem(now, dir_path, "not a <podUID>_<containerName> directory");
      continue;
    }
    if (found.size() >= limits_.containers) {
      ++skipped_;
      continue;
    }
    if (auto c = read_container(dir, *ref, now)) found.push_back(std::move(*c));
  }
  if (skipped_ != 0 && !skipped_logged_) {
    log::warn(
        "%s: more than %zu containers with state files; %zu left unread this pass "
        "(hami_monitor_containers_skipped)",
        containers.c_str(), limits_.containers, skipped_);
  }
  skipped_logged_ = skipped_ != 0;
  problems_ = std::move(now);
  return found;
}

}  // namespace hami::monitor
