#pragma once
// Runs programs as tests need them: to completion with captured output, or in
// the background with stdin held open (to keep it alive) and its output read
// line by line. Environment changes are applied in the child only.
//
//   auto r = hami::test::run_process({VGPU_BINARY, "inspect", path});
//   auto c = hami::test::Child::spawn({client, "init", "mark", "hold"}, {{"K", "V"}});
//   c.wait_for_line("op=mark");  ...  c.close_stdin();  auto done = c.finish();

#include <sys/types.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace hami::test {

struct ProcessResult {
  int exit_code = -1;  // 128 + signal when killed by one
  std::string out;
  std::string err;
};

using Env = std::vector<std::pair<std::string, std::string>>;
// An Env value that removes the variable instead of setting it.
inline constexpr const char* kUnset = "\x01unset";
// `base` with each of `extra`'s variables set over it (added when absent).
inline Env with_overrides(Env base, const Env& extra) {
  for (const auto& kv : extra) {
    bool replaced = false;
    for (auto& cur : base) {
      if (cur.first == kv.first) {
        cur.second = kv.second;
        replaced = true;
      }
    }
    if (!replaced) base.push_back(kv);
  }
  return base;
}

ProcessResult run_process(const std::vector<std::string>& argv, const Env& env = {});

class Child {
 public:
  static Child spawn(const std::vector<std::string>& argv, const Env& env = {});
  Child(Child&& other) noexcept;
  Child& operator=(Child&&) = delete;
  ~Child();  // kills and reaps a child still running

  pid_t pid() const { return pid_; }
  // Reads stdout until a line containing `text` arrives; false on EOF or timeout.
  bool wait_for_line(const std::string& text,
                     std::chrono::milliseconds timeout = std::chrono::seconds(20));
  void close_stdin();
  void kill(int sig);
  // Closes stdin, reads everything, reaps.
  ProcessResult finish();
  const std::string& out() const { return out_; }

 private:
  Child() = default;
  bool pump(std::chrono::milliseconds timeout);
  pid_t pid_ = -1;
  int in_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  std::string out_;
  std::string err_;
  size_t scanned_ = 0;
};

}  // namespace hami::test
