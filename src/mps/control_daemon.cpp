#include "mps/control_daemon.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <thread>
#include <utility>

#include "common/small_file.hpp"
#include "common/unique_fd.hpp"
#include "mps/process.hpp"
#include "protocol/container_contract.hpp"

namespace hami::mps {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

namespace {

constexpr milliseconds kPoll{50};

std::optional<pid_t> read_pid_file(const fs::path& pipe_dir) {
  auto text = read_small_file((pipe_dir / kPidFile).string(), 64);
  if (!text) return std::nullopt;
  char* end = nullptr;
  const long v = std::strtol(text->c_str(), &end, 10);
  if (end == text->c_str() || v <= 1 || v > 0x3fffffff) return std::nullopt;
  return static_cast<pid_t>(v);
}

// Alive, not a zombie and still the MPS control program (a stale pid file's
// pid may have been reused by an unrelated process we must never signal).
// comm holds the first 15 bytes of the program's name. A daemon that was re-parented to us (we run
// as the container's PID 1) becomes our zombie when it exits: reap it here.
bool process_alive(pid_t pid) {
  int status = 0;
  if (::waitpid(pid, &status, WNOHANG) == pid) return false;
  if (::kill(pid, 0) != 0 && errno != EPERM) return false;
  auto stat = read_small_file("/proc/" + std::to_string(pid) + "/stat", 4096);
  if (!stat) return false;
  const auto open = stat->find('(');
  const auto close = stat->rfind(')');
  if (open == std::string::npos || close == std::string::npos || close + 2 >= stat->size())
    return false;
  const std::string comm = stat->substr(open + 1, close - open - 1);
  return std::string_view(kControlBinary).substr(0, 15) == comm && (*stat)[close + 2] != 'Z';
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string trimmed(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
    s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i])))
    ++i;
  return s.substr(i);
}

bool executable_file(const fs::path& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
}

std::string ms(milliseconds d) {
  return std::to_string(d.count()) + " ms";
}

}  // namespace

std::string last_log_line(const fs::path& log_dir) {
  std::ifstream in(log_dir / kControlLog);
  std::string line;
  std::string last;
  while (std::getline(in, line)) {
    line = trimmed(line);
    if (!line.empty()) last = line;
  }
  return last;
}

std::optional<std::string> compute_mode_refusal(int nvml_compute_mode, const std::string& uuid) {
  // nvmlComputeMode_t: 1 EXCLUSIVE_THREAD, 2 PROHIBITED.
  const char* name = nvml_compute_mode == 1   ? "EXCLUSIVE_THREAD"
                     : nvml_compute_mode == 2 ? "PROHIBITED"
                                              : nullptr;
  if (name == nullptr) return std::nullopt;
  return "GPU " + uuid + " is in compute mode " + name +
         ", where MPS cannot run; set it to EXCLUSIVE_PROCESS or DEFAULT with `nvidia-smi -i " +
         uuid + " -c EXCLUSIVE_PROCESS` (as root)";
}

ControlDaemon::ControlDaemon(DaemonOptions options) : options_(std::move(options)) {}

Result<fs::path> ControlDaemon::binary() const {
  if (!options_.control_binary.empty()) {
    if (executable_file(options_.control_binary)) return options_.control_binary;
    return Error{options_.control_binary.string() + ": not an executable file; point " +
                 options_.binary_setting +
                 " at nvidia-cuda-mps-control (part of the NVIDIA driver utilities)"};
  }
  const char* path_env = std::getenv("PATH");
  const std::string path = path_env ? path_env : "";
  size_t start = 0;
  while (start <= path.size()) {
    const size_t end = std::min(path.find(':', start), path.size());
    const std::string dir = path.substr(start, end - start);
    if (!dir.empty() && executable_file(fs::path(dir) / kControlBinary))
      return fs::path(dir) / kControlBinary;
    start = end + 1;
  }
  return Error{std::string(kControlBinary) + " not found in PATH (" + path +
               "); install the NVIDIA driver utilities (the package that has nvidia-smi) or set " +
               options_.binary_setting};
}

Result<void> ControlDaemon::prepare_dirs() const {
  if (options_.gpu_uuid.empty() || options_.gpu_uuid.find_first_of("/,") != std::string::npos)
    return Error{"MPS daemon: invalid GPU UUID \"" + options_.gpu_uuid + "\""};
  // sun_path holds 108 bytes with the terminating NUL.
  const auto socket = (options_.pipe_dir / kControlSocket).string();
  if (socket.size() >= sizeof(sockaddr_un{}.sun_path))
    return Error{"MPS pipe directory " + options_.pipe_dir.string() +
                 " is too long for a unix socket (" + std::to_string(socket.size()) +
                 " bytes with /control, at most " +
                 std::to_string(sizeof(sockaddr_un{}.sun_path) - 1) + "); choose a shorter root"};
  // Clients of any UID connect to the socket and the MPS server writes its
  // log as the client's UID, hence 0755 for both.
  for (const auto& dir : {options_.pipe_dir, options_.log_dir}) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) return Error{"creating " + dir.string() + ": " + ec.message(), ec.value()};
    if (::chmod(dir.c_str(), 0755) != 0) return Error::from_errno("chmod 0755 " + dir.string());
  }
  return {};
}

Result<std::string> ControlDaemon::command(std::string_view line) {
  auto bin = binary();
  if (!bin) return bin.error();
  auto r = run_program({bin->string()},
                       {{protocol::kEnvMpsPipeDir, options_.pipe_dir.string()},
                        {protocol::kEnvMpsLogDir, options_.log_dir.string()}},
                       std::string(line) + "\n", options_.command_timeout);
  if (!r) return r.error();
  if (r->exit_code != 0)
    return Error{"MPS control daemon at " + options_.pipe_dir.string() + " did not take \"" +
                 std::string(line) + "\" (" + kControlBinary + " exit " +
                 std::to_string(r->exit_code) + "): " + trimmed(r->output)};
  return std::move(r->output);
}

Result<void> ControlDaemon::check() {
  // A question whose answer is never empty: scripts around the real client
  // check its output as well as its exit status, so an empty answer with
  // status 0 does not count as a daemon answering.
  auto r = command("get_default_active_thread_percentage");
  if (!r) return r.error();
  const std::string answer = trimmed(*r);
  char* end = nullptr;
  (void)std::strtod(answer.c_str(), &end);
  if (answer.empty() || end != answer.c_str() + answer.size())
    return Error{"MPS control daemon at " + options_.pipe_dir.string() +
                 " gave no thread percentage to get_default_active_thread_percentage (answer: \"" +
                 answer.substr(0, 200) + "\")"};
  return {};
}

std::optional<pid_t> ControlDaemon::pid() const {
  if (auto p = read_pid_file(options_.pipe_dir); p && process_alive(*p)) {
    last_pid_ = *p;
    return p;
  }
  if (last_pid_ > 0 && process_alive(last_pid_)) return last_pid_;
  return std::nullopt;
}

Error ControlDaemon::start_failure(std::string what) const {
  const std::string log_line = last_log_line(options_.log_dir);
  if (log_line.empty()) {
    what += "; " + (options_.log_dir / kControlLog).string() + " is empty or missing";
    return Error{std::move(what)};
  }
  what += "; " + (options_.log_dir / kControlLog).string() + " ends with: " + log_line;
  const std::string l = lower(log_line);
  if (l.find("exclusive_thread") != std::string::npos ||
      l.find("prohibited") != std::string::npos || l.find("compute mode") != std::string::npos)
    what +=
        ". The GPU's compute mode likely forbids MPS (EXCLUSIVE_THREAD or PROHIBITED): set it with "
        "`nvidia-smi -i " +
        options_.gpu_uuid + " -c EXCLUSIVE_PROCESS` (or DEFAULT)";
  return Error{std::move(what)};
}

Result<Started> ControlDaemon::start() {
  auto bin = binary();
  if (!bin) return bin.error();
  if (auto dirs = prepare_dirs(); !dirs) return dirs.error();
  // Held until this start is over: a second `-d` meanwhile would fail with
  // "An instance of this daemon is already running".
  const fs::path lock_path = options_.pipe_dir.parent_path() / "start.lock";
  // Read-only is enough for flock, and lets another user's start take turns.
  UniqueFd lock{::open(lock_path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644)};
  if (lock.get() < 0) return Error::from_errno(lock_path.string() + ": cannot open");
  const auto lock_deadline = Clock::now() + 2 * options_.start_timeout;
  while (::flock(lock.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR)
      return Error::from_errno(lock_path.string() + ": cannot lock");
    if (Clock::now() >= lock_deadline)
      return Error{"another start of the MPS control daemon for GPU " + options_.gpu_uuid +
                   " has held " + lock_path.string() + " for " + ms(2 * options_.start_timeout)};
    std::this_thread::sleep_for(kPoll);
  }
  if (check()) {
    (void)pid();
    return Started::reused;
  }
  const std::string who = "MPS control daemon for GPU " + options_.gpu_uuid;
  // A daemon that was killed left its pid file: gone, so that the wait below
  // does not take the dead pid for the new daemon dying.
  if (const auto stale = read_pid_file(options_.pipe_dir); stale && !process_alive(*stale)) {
    std::error_code ec;
    fs::remove(options_.pipe_dir / kPidFile, ec);
  }
  auto launch = run_program({bin->string(), "-d"},
                            {{protocol::kEnvMpsPipeDir, options_.pipe_dir.string()},
                             {protocol::kEnvMpsLogDir, options_.log_dir.string()},
                             {protocol::kEnvCudaVisible, options_.gpu_uuid}},
                            "", options_.start_timeout);
  if (!launch) return start_failure(who + ": " + launch.error().message);
  if (launch->exit_code != 0)
    return start_failure(who + ": `" + bin->string() + " -d` exited " +
                         std::to_string(launch->exit_code) +
                         (trimmed(launch->output).empty() ? "" : ": " + trimmed(launch->output)));

  // -d forks the daemon and returns at once; wait until it answers, noticing
  // when it dies first.
  const auto deadline = Clock::now() + options_.start_timeout;
  bool seen = false;
  for (;;) {
    auto answered = check();
    if (answered) {
      (void)pid();
      return Started::fresh;
    }
    const auto p = read_pid_file(options_.pipe_dir);
    if (p) {
      seen = true;
      if (!process_alive(*p)) return start_failure(who + " exited right after it started");
      last_pid_ = *p;
    } else if (seen) {
      return start_failure(who + " exited right after it started");
    }
    if (Clock::now() >= deadline)
      return start_failure(
          who + " did not answer on " + (options_.pipe_dir / kControlSocket).string() + " within " +
          ms(options_.start_timeout) + " (last try: " + answered.error().message + ")");
    std::this_thread::sleep_for(kPoll);
  }
}

Result<void> ControlDaemon::stop() {
  // An error here (no daemon answering) still leaves a process to look for.
  (void)command("quit");
  const auto deadline = Clock::now() + options_.stop_timeout;
  while (Clock::now() < deadline) {
    if (!pid()) return {};
    std::this_thread::sleep_for(kPoll);
  }
  const auto still = pid();
  if (!still) return {};
  // Last resort: the daemon did not quit in time.
  if (::kill(*still, SIGKILL) != 0 && errno != ESRCH)
    return Error::from_errno("MPS control daemon (pid " + std::to_string(*still) + ") for GPU " +
                             options_.gpu_uuid + " ignored quit and SIGKILL failed");
  const auto kill_deadline = Clock::now() + options_.stop_timeout;
  while (Clock::now() < kill_deadline) {
    if (!process_alive(*still)) {
      std::error_code ec;
      fs::remove(options_.pipe_dir / kPidFile, ec);
      return {};
    }
    std::this_thread::sleep_for(kPoll);
  }
  return Error{"MPS control daemon (pid " + std::to_string(*still) + ") for GPU " +
               options_.gpu_uuid + " still runs " + ms(options_.stop_timeout) + " after SIGKILL"};
}

}  // namespace hami::mps
