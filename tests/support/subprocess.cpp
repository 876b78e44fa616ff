#include "support/subprocess.hpp"

#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

namespace hami::test {
namespace {

int reap(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

bool drain(int& fd, std::string& sink) {
  char buf[4096];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  if (n > 0) {
    sink.append(buf, static_cast<size_t>(n));
    return true;
  }
  if (n < 0 && errno == EINTR) return true;
  ::close(fd);
  fd = -1;
  return false;
}

}  // namespace

Child Child::spawn(const std::vector<std::string>& argv, const Env& env) {
  int in[2], out[2], err[2];
  Child c;
  if (::pipe(in) != 0 || ::pipe(out) != 0 || ::pipe(err) != 0) return c;
  std::vector<char*> args;
  for (const auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    for (const auto& [k, v] : env) {
      if (v == kUnset) {
        ::unsetenv(k.c_str());
      } else {
        ::setenv(k.c_str(), v.c_str(), 1);
      }
    }
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]})
      ::close(fd);
    ::execv(args[0], args.data());
    _exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  c.pid_ = pid;
  c.in_ = in[1];
  c.out_fd_ = out[0];
  c.err_fd_ = err[0];
  return c;
}

Child::Child(Child&& o) noexcept
    : pid_(std::exchange(o.pid_, -1)),
      in_(std::exchange(o.in_, -1)),
      out_fd_(std::exchange(o.out_fd_, -1)),
      err_fd_(std::exchange(o.err_fd_, -1)),
      out_(std::move(o.out_)),
      err_(std::move(o.err_)),
      scanned_(o.scanned_) {}

Child::~Child() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    reap(pid_);
  }
  for (int fd : {in_, out_fd_, err_fd_}) {
    if (fd >= 0) ::close(fd);
  }
}

bool Child::pump(std::chrono::milliseconds timeout) {
  pollfd fds[2] = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
  const int n = ::poll(fds, 2, static_cast<int>(timeout.count()));
  if (n <= 0) return n < 0 && errno == EINTR;
  bool progress = false;
  if (fds[0].fd >= 0 && fds[0].revents != 0) progress |= drain(out_fd_, out_);
  if (fds[1].fd >= 0 && fds[1].revents != 0) progress |= drain(err_fd_, err_);
  return progress || out_fd_ >= 0 || err_fd_ >= 0;
}

bool Child::wait_for_line(const std::string& text, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    // Matches only after the previous match, so waiting twice for the same
    // text waits for its second appearance.
    const size_t at = out_.find(text, scanned_);
    if (at != std::string::npos) {
      scanned_ = at + text.size();
      return true;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || (out_fd_ < 0 && err_fd_ < 0)) return false;
    if (!pump(left) && out_fd_ < 0) return false;
  }
}

void Child::close_stdin() {
  if (in_ >= 0) ::close(in_);
  in_ = -1;
}

void Child::kill(int sig) {
  if (pid_ > 0) ::kill(pid_, sig);
}

ProcessResult Child::finish() {
  close_stdin();
  while (out_fd_ >= 0 || err_fd_ >= 0)
    pump(std::chrono::seconds(30));
  ProcessResult r;
  r.exit_code = pid_ > 0 ? reap(pid_) : -1;
  pid_ = -1;
  r.out = out_;
  r.err = err_;
  return r;
}

ProcessResult run_process(const std::vector<std::string>& argv, const Env& env) {
  return Child::spawn(argv, env).finish();
}

}  // namespace hami::test
