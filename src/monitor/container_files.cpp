#include "monitor/container_files.hpp"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/log.hpp"

namespace hami::monitor {

namespace {

// Names in a directory, sorted; empty (and errno set) when it cannot be read.
std::vector<std::string> list_dir(const std::string& path, int* err) {
  std::vector<std::string> names;
  *err = 0;
  DIR* d = ::opendir(path.c_str());
  if (d == nullptr) {
    *err = errno;
    return names;
  }
  while (const dirent* e = ::readdir(d)) {
    const std::string_view n = e->d_name;
    if (n == "." || n == "..") continue;
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

ContainerFiles::ContainerFiles(std::string root) : root_(std::move(root)) {}

void ContainerFiles::note_problem(std::map<std::string, std::string>& now, const std::string& path,
                                  std::string reason) {
  auto old = problems_.find(path);
  if (old == problems_.end() || old->second != reason) {
    log::warn("%s: %s; skipped until it reads well", path.c_str(), reason.c_str());
    ++problems_logged_;
  }
  now[path] = std::move(reason);
}

std::vector<ContainerState> ContainerFiles::scan() {
  std::vector<ContainerState> found;
  std::map<std::string, std::string> now;
  const std::string containers = root_ + "/containers";
  int err = 0;
  const std::vector<std::string> dirs = list_dir(containers, &err);
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
    const std::vector<std::string> files = list_dir(dir_path, &err);
    if (err != 0) {
      note_problem(now, dir_path, std::string("cannot list: ") + std::strerror(err));
      continue;
    }
    for (const std::string& file : files) {
      if (!ends_with(file, ".cache")) continue;
      const std::string path = dir_path + "/" + file;
      if (::lstat(path.c_str(), &st) != 0) continue;  // vanished since the listing
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
      found.push_back(ContainerState{*ref, path, std::move(*snap)});
    }
  }
  problems_ = std::move(now);
  return found;
}

}  // namespace hami::monitor
