// Start-up benchmark: N containers' first processes started at once, each
// making its first CUDA calls (startup-client) against the simulated driver:
//   bare    without libvgpu.so (the baseline)
//   own     with libvgpu.so and a state file each (one container per file,
//           each file created by its process)
//   shared  with libvgpu.so and one state file for all (the first creates it,
//           the others attach and register)
//   own-base, shared-base   the same with --baseline-libvgpu (another build,
//           e.g. an earlier commit), in the same rounds
// All N are forked first and wait on one pipe; closing it releases them at
// once, and each then execs startup-client (dynamic loading, libvgpu.so's
// start, the first calls). A process's start-up is the time from that
// release to its first allocation returning; every process keeps running
// (holding its slot) until all have reported. Modes alternate within each
// round, in a rotating order, so a busy machine weighs on all of them alike.
//
//   startup-bench --client build/.../startup-client --libvgpu build/.../libvgpu.so
//       --simgpu-dir build/.../simgpu/lib --containers 256 --rounds 5
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

extern char** environ;

namespace {

int64_t now_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<int64_t>(t.tv_sec) * 1000000000LL + t.tv_nsec;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  return v[i];
}

double median(std::vector<double> v) {
  return percentile(std::move(v), 0.5);
}

struct Child {
  pid_t pid = -1;
  int in = -1;   // our end of its stdin
  int out = -1;  // our end of its stdout
  int64_t ready = 0;
  int rc = -1;
  std::string line;
  rusage usage{};
};

struct ModeResult {
  std::string mode;
  int round = 0;
  std::vector<double> ms;      // start-up per process
  std::vector<double> faults;  // minor page faults per process
  std::vector<double> cpu_ms;  // user + system CPU per process
  int failed = 0;
};

struct Options {
  std::string client, libvgpu, baseline, simgpu_dir, dir = "/tmp/hami-startup-bench";
  int containers = 256, rounds = 5, timeout_s = 120;
  std::vector<std::string> modes = {"bare", "own", "shared"};
};

std::vector<std::string> child_env(const Options& o, const std::string& mode,
                                   const std::string& dir, int i) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string s(*e);
    if (s.rfind("LD_PRELOAD=", 0) == 0 || s.rfind("LD_LIBRARY_PATH=", 0) == 0 ||
        s.rfind("CUDA_", 0) == 0 || s.rfind("SIMGPU_", 0) == 0)
      continue;
    env.push_back(s);
  }
  env.push_back("LD_LIBRARY_PATH=" + o.simgpu_dir);
  // Small contexts: one shared file charges all of them to one limit.
  env.push_back("SIMGPU_CONTEXT_SIZE=16m");
  if (mode != "bare") {
    const bool base = mode.ends_with("-base");
    env.push_back("LD_PRELOAD=" + (base ? o.baseline : o.libvgpu));
    env.push_back("CUDA_DEVICE_MEMORY_LIMIT=64g");
    env.push_back("CUDA_DEVICE_MEMORY_SHARED_CACHE=" + dir + "/" +
                  (mode.starts_with("own") ? std::to_string(i) : std::string("shared")) + ".cache");
  }
  return env;
}

ModeResult run_mode(const Options& o, const std::string& mode, int round) {
  ModeResult r;
  r.mode = mode;
  r.round = round;
  const std::string dir = o.dir + "/r" + std::to_string(round) + "-" + mode;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const int log =
      ::open((dir + "/stderr.log").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  std::vector<Child> kids(static_cast<size_t>(o.containers));
  int go[2];
  if (::pipe2(go, O_CLOEXEC) != 0) {
    std::perror("pipe");
    std::exit(1);
  }
  for (int i = 0; i < o.containers; ++i) {
    Child& c = kids[static_cast<size_t>(i)];
    std::vector<std::string> env = child_env(o, mode, dir, i);
    std::vector<char*> envp;
    for (auto& e : env)
      envp.push_back(e.data());
    envp.push_back(nullptr);
    char* argv[] = {const_cast<char*>(o.client.c_str()), nullptr};
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) {
      std::perror("pipe");
      std::exit(1);
    }
    c.pid = ::fork();
    if (c.pid < 0) {
      std::perror("fork");
      std::exit(1);
    }
    if (c.pid == 0) {
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      ::dup2(log, 2);
      ::close(go[1]);
      char b;
      while (::read(go[0], &b, 1) > 0) {
      }
      ::execve(o.client.c_str(), argv, envp.data());
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    c.in = in[1];
    c.out = out[0];
  }
  ::close(go[0]);
  const int64_t released = now_ns();
  ::close(go[1]);  // every process starts now
  // Every process reports once.
  const int64_t deadline = now_ns() + static_cast<int64_t>(o.timeout_s) * 1000000000LL;
  int pending = o.containers;
  while (pending > 0 && now_ns() < deadline) {
    std::vector<pollfd> fds;
    std::vector<size_t> which;
    for (size_t i = 0; i < kids.size(); ++i) {
      if (kids[i].out >= 0) {
        fds.push_back({kids[i].out, POLLIN, 0});
        which.push_back(i);
      }
    }
    if (::poll(fds.data(), fds.size(), 1000) < 0 && errno != EINTR) break;
    for (size_t k = 0; k < fds.size(); ++k) {
      if (!(fds[k].revents & (POLLIN | POLLHUP))) continue;
      Child& c = kids[which[k]];
      char buf[128];
      const ssize_t n = ::read(c.out, buf, sizeof buf);
      if (n > 0) c.line.append(buf, static_cast<size_t>(n));
      const bool done = n <= 0 || c.line.find('\n') != std::string::npos;
      if (!done) continue;
      long long t = 0;
      int rc = -1;
      if (std::sscanf(c.line.c_str(), "%lld %d", &t, &rc) == 2) {
        c.ready = t;
        c.rc = rc;
      }
      ::close(c.out);
      c.out = -1;
      --pending;
    }
  }
  for (Child& c : kids) {
    ::close(c.in);  // the containers may end now
    if (c.out >= 0) ::close(c.out);
  }
  for (Child& c : kids) {
    int status = 0;
    if (::wait4(c.pid, &status, 0, &c.usage) < 0) continue;
    if (c.ready == 0 || c.rc != 0) {
      ++r.failed;
      continue;
    }
    r.ms.push_back(static_cast<double>(c.ready - released) / 1e6);
    r.faults.push_back(static_cast<double>(c.usage.ru_minflt));
    const auto tv_ms = [](const timeval& tv) {
      return static_cast<double>(tv.tv_sec) * 1e3 + static_cast<double>(tv.tv_usec) / 1e3;
    };
    r.cpu_ms.push_back(tv_ms(c.usage.ru_utime) + tv_ms(c.usage.ru_stime));
  }
  if (log >= 0) ::close(log);
  // The state files' dirty pages go to disk here, not during the next mode.
  ::sync();
  if (r.failed == 0) std::filesystem::remove_all(dir);
  return r;
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v)
    s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

}  // namespace

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  Options o;
  CLI::App app{
      "startup-bench: N containers' first processes started at once, with and without "
      "libvgpu.so (simulated driver)"};
  app.add_option("--client", o.client, "startup-client")->required();
  app.add_option("--libvgpu", o.libvgpu, "libvgpu.so")->required();
  app.add_option("--simgpu-dir", o.simgpu_dir, "directory of the simulated libcuda.so.1")
      ->required();
  app.add_option("--baseline-libvgpu", o.baseline,
                 "another libvgpu.so to compare in the same rounds (modes own-base, shared-base)");
  app.add_option("--dir", o.dir, "where state files are made (a disk, as a node's)")
      ->capture_default_str();
  app.add_option("--containers", o.containers)->capture_default_str();
  app.add_option("--rounds", o.rounds)->capture_default_str();
  app.add_option("--timeout", o.timeout_s, "seconds per mode")->capture_default_str();
  app.add_option("--modes", o.modes, "bare own shared")->delimiter(',')->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (!o.baseline.empty() && app.count("--modes") == 0) {
    o.modes.push_back("own-base");
    o.modes.push_back("shared-base");
  }

  std::vector<ModeResult> all;
  std::printf("%-6s %-12s %5s %8s %8s %8s %8s %9s %8s %6s\n", "round", "mode", "ok", "p50_ms",
              "p90_ms", "p99_ms", "max_ms", "minflt", "cpu_ms", "failed");
  for (int round = 1; round <= o.rounds; ++round) {
    std::vector<std::string> order = o.modes;
    std::rotate(order.begin(),
                order.begin() + static_cast<std::ptrdiff_t>((round - 1) % order.size()),
                order.end());
    for (const std::string& mode : order) {
      ModeResult r = run_mode(o, mode, round);
      std::printf("%-6d %-12s %5zu %8.1f %8.1f %8.1f %8.1f %9.0f %8.2f %6d\n", round, mode.c_str(),
                  r.ms.size(), percentile(r.ms, 0.5), percentile(r.ms, 0.9), percentile(r.ms, 0.99),
                  percentile(r.ms, 1.0), mean(r.faults), mean(r.cpu_ms), r.failed);
      std::fflush(stdout);
      all.push_back(std::move(r));
    }
  }
  // What the library adds: p99 with it minus p99 without, in the same round.
  std::printf("\nMedian over %d rounds of %d containers:\n", o.rounds, o.containers);
  std::map<std::string, std::vector<double>> p99, p50, faults, cpu, added;
  std::map<int, double> bare_p99;
  for (const ModeResult& r : all)
    if (r.mode == "bare") bare_p99[r.round] = percentile(r.ms, 0.99);
  int failed = 0;
  for (const ModeResult& r : all) {
    p99[r.mode].push_back(percentile(r.ms, 0.99));
    p50[r.mode].push_back(percentile(r.ms, 0.5));
    faults[r.mode].push_back(mean(r.faults));
    cpu[r.mode].push_back(mean(r.cpu_ms));
    if (r.mode != "bare" && bare_p99.count(r.round))
      added[r.mode].push_back(percentile(r.ms, 0.99) - bare_p99[r.round]);
    failed += r.failed;
  }
  for (const std::string& mode : o.modes) {
    std::printf("  %-12s start-up p50 %7.1f ms, p99 %7.1f ms", mode.c_str(), median(p50[mode]),
                median(p99[mode]));
    if (mode != "bare" && !added[mode].empty()) {
      std::printf(" (adds %6.1f ms to bare's p99; rounds from %.1f to %.1f)", median(added[mode]),
                  *std::min_element(added[mode].begin(), added[mode].end()),
                  *std::max_element(added[mode].begin(), added[mode].end()));
    }
    std::printf("; %5.0f minor faults and %.2f ms of CPU per process\n", median(faults[mode]),
                median(cpu[mode]));
  }
  if (failed) std::printf("  %d processes failed (see stderr.log of their mode)\n", failed);
  return failed ? 1 : 0;
}
