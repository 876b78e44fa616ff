#include "mps/process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/unique_fd.hpp"

extern char** environ;

namespace hami::mps {

namespace {

constexpr size_t kMaxOutput = 64 * 1024;

std::vector<std::string> merged_environment(const EnvOverrides& env) {
  std::vector<std::string> out;
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    const auto eq = kv.find('=');
    const std::string_view name = kv.substr(0, eq);
    bool overridden = false;
    for (const auto& o : env)
      overridden = overridden || o.first == name;
    if (!overridden) out.emplace_back(kv);
  }
  for (const auto& o : env)
    out.push_back(o.first + "=" + o.second);
  return out;
}

// A memory file holding `text`, read from the start: the child's stdin. A file
// rather than a pipe, so a child that never reads cannot block us and one that
// exits early cannot raise SIGPIPE in us.
Result<UniqueFd> stdin_file(const std::string& text) {
  UniqueFd fd(::memfd_create("mps-stdin", MFD_CLOEXEC));
  if (fd.get() < 0) return Error::from_errno("memfd_create for the MPS control program's stdin");
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::from_errno("writing the MPS control program's stdin");
    done += static_cast<size_t>(n);
  }
  if (::lseek(fd.get(), 0, SEEK_SET) < 0) return Error::from_errno("rewinding the stdin file");
  return fd;
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// Appends what the pipe holds now; false at end of file.
bool drain(int fd, std::string& out) {
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      const size_t room = kMaxOutput - std::min(kMaxOutput, out.size());
      out.append(buf, std::min(room, static_cast<size_t>(n)));
      continue;
    }
    if (n == 0) return false;
    if (errno == EINTR) continue;
    return true;  // EAGAIN: nothing more for now
  }
}

}  // namespace

Result<ProgramResult> run_program(const std::vector<std::string>& argv, const EnvOverrides& env,
                                  const std::string& stdin_text,
                                  std::chrono::milliseconds timeout) {
  if (argv.empty()) return Error{"run_program: empty command line"};
  auto in = stdin_file(stdin_text);
  if (!in) return in.error();
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return Error::from_errno("pipe for " + argv[0]);
  UniqueFd out_r(pipe_fds[0]);
  UniqueFd out_w(pipe_fds[1]);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in->get(), 0);
  posix_spawn_file_actions_adddup2(&actions, out_w.get(), 1);
  posix_spawn_file_actions_adddup2(&actions, out_w.get(), 2);
  // The child starts with default signal dispositions and mask, whatever the
  // calling daemon blocks for its own signal handling.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  sigset_t all;
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  std::vector<char*> args;
  for (const auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const auto env_strings = merged_environment(env);
  std::vector<char*> envp;
  for (const auto& e : env_strings)
    envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, argv[0].c_str(), &actions, &attr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return Error::from_errno("starting " + argv[0], rc);
  out_w.reset();
  ::fcntl(out_r.get(), F_SETFL, ::fcntl(out_r.get(), F_GETFL) | O_NONBLOCK);

  ProgramResult result;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool open = true;
  for (;;) {
    int status = 0;
    const pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) {
      // Exited: take what is buffered, but do not wait for a daemonised
      // grandchild that inherited the pipe.
      if (open) drain(out_r.get(), result.output);
      result.exit_code = exit_code_of(status);
      return result;
    }
    if (w < 0 && errno == ECHILD) {
      // Someone else reaped it (SIGCHLD ignored): its status is lost.
      if (open) drain(out_r.get(), result.output);
      return result;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      return Error{argv[0] + " did not finish within " + std::to_string(timeout.count()) +
                   " ms (killed it); output so far: " + result.output};
    }
    if (open) {
      pollfd p{out_r.get(), POLLIN, 0};
      ::poll(&p, 1, 20);
      open = drain(out_r.get(), result.output);
    } else {
      ::usleep(10 * 1000);
    }
  }
}

}  // namespace hami::mps
