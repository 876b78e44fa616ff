// sample-state-file: writes a state file the way libvgpu.so processes would, so
// the demo and humans can look at one without a GPU. Uses only the region library.
//
//   sample-state-file /tmp/demo.cache --ready-file /tmp/demo.ready
//
// It creates the file with limits for two devices, starts three worker processes
// that each claim a slot and charge memory, SIGKILLs the third (leaving a dead
// owner's slot for `vgpu inspect` to show and a sweep to reclaim), creates the
// ready file, and holds until SIGTERM or SIGINT; then the live workers release
// their slots and exit.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "region/region.hpp"

namespace {

using hami::region::OpenOptions;
using hami::region::Region;
using hami::region::UsageKind;

constexpr uint64_t kMiB = 1ull << 20;

struct Worker {
  int device;
  uint64_t context_mib;
  uint64_t data_mib;
};

// Child body: claim a slot, charge, report, then wait for the parent to let go.
[[noreturn]] void run_worker(const std::string& path, const Worker& w, int ready_fd, int hold_fd) {
  auto region = Region::open(path, OpenOptions{.create = false});
  if (!region) {
    std::fprintf(stderr, "worker: %s\n", region.error().message.c_str());
    _exit(1);
  }
  auto me = hami::region::self_identity();
  auto slot = me ? region->register_process(*me) : hami::Result<int>(me.error());
  if (!slot) {
    std::fprintf(stderr, "worker: %s\n", slot.error().message.c_str());
    _exit(1);
  }
  region->slot(*slot).add_usage(w.device, UsageKind::kContext, w.context_mib * kMiB);
  region->slot(*slot).add_usage(w.device, UsageKind::kData, w.data_mib * kMiB);
  char ok = 1;
  (void)!::write(ready_fd, &ok, 1);
  char buf;
  while (::read(hold_fd, &buf, 1) != 0) {  // EOF when the parent closes its end
  }
  region->unregister_process();
  _exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0) {
    std::fprintf(stderr, "usage: sample-state-file PATH [--ready-file FILE]\n");
    return argc < 2 ? 2 : 0;
  }
  const std::string path = argv[1];
  std::string ready_file;
  if (argc == 4 && std::strcmp(argv[2], "--ready-file") == 0) ready_file = argv[3];

  OpenOptions opt;
  opt.initial.memory_limit[0] = 4096 * kMiB;
  opt.initial.memory_limit[1] = 8192 * kMiB;
  opt.initial.sm_limit[0] = 30;
  opt.initial.sm_limit[1] = 60;
  opt.initial.priority = 1;
  auto region = Region::open(path, opt);
  if (!region) {
    std::fprintf(stderr, "sample-state-file: %s\n", region.error().message.c_str());
    return 1;
  }
  region->set_device_count(2);
  (void)region->set_device_uuid(0, "GPU-00000000-5a3e-4d0c-8000-000000000000");
  (void)region->set_device_uuid(1, "GPU-00000001-5a3e-4d0c-8000-000000000001");

  // Block the stop signals before forking so the parent can sigwait for them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  sigprocmask(SIG_BLOCK, &stop, nullptr);

  int ready[2], hold[2];
  if (::pipe(ready) != 0 || ::pipe(hold) != 0) {
    std::perror("pipe");
    return 1;
  }
  const std::vector<Worker> workers = {{0, 300, 1024}, {1, 300, 2048}, {0, 300, 512}};
  std::vector<pid_t> pids;
  for (const Worker& w : workers) {
    pid_t pid = ::fork();
    if (pid == 0) {
      region->abandon();  // the child must not share the parent's file description
      ::close(ready[0]);
      ::close(hold[1]);
      run_worker(path, w, ready[1], hold[0]);
    }
    pids.push_back(pid);
  }
  ::close(ready[1]);
  ::close(hold[0]);
  for (size_t i = 0; i < workers.size(); ++i) {
    char c;
    if (::read(ready[0], &c, 1) != 1) {
      std::fprintf(stderr, "sample-state-file: a worker failed to start\n");
      return 1;
    }
  }
  ::kill(pids.back(), SIGKILL);  // dies holding a slot: its lock goes, its usage stays
  ::waitpid(pids.back(), nullptr, 0);
  std::printf(
      "sample-state-file: %s: workers %d and %d hold slots; worker %d was killed with "
      "SIGKILL\n",
      path.c_str(), pids[0], pids[1], pids[2]);
  std::fflush(stdout);
  if (!ready_file.empty()) {
    if (FILE* f = std::fopen(ready_file.c_str(), "w")) std::fclose(f);
  }

  int sig = 0;
  sigwait(&stop, &sig);
  ::close(hold[1]);
  for (size_t i = 0; i + 1 < pids.size(); ++i)
    ::waitpid(pids[i], nullptr, 0);
  return 0;
}
