// switch-phases: plays the node agent's part in the SM-limit benchmark's
// in-process runs. Under GPU_CORE_UTILIZATION_POLICY=default a container's
// share is enforced only while its state file's utilization_switch is set (the
// agent sets it while another container is busy on the GPU). Flipping it on a
// schedule lets one process run unthrottled, throttled, then unthrottled again,
// so its throttled rate is judged against its own unthrottled rate: on a host
// where two runs of the same program differ by tens of percent, a reference
// from another process says more about the host than about the limiter.
//
//   switch-phases /tmp/c.cache 0:5 1:11 0:0
//
// Waits up to 60 s for the file to hold a valid state file (the library creates
// it on the program's first CUDA call), then for each VALUE:SECONDS step sets
// utilization_switch to VALUE and holds it SECONDS. Writes go through the node
// agent's own StateWriter. Prints one JSON line per change:
//   {"switch": 0, "t_ns": <CLOCK_MONOTONIC ns, the clock of std::steady_clock>}
// Exit status: 2 usage, 3 no valid state file, 4 a write failed.
#include <time.h>

#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "monitor/state_writer.hpp"
#include "region/snapshot.hpp"

namespace {

struct Step {
  int32_t value = 0;
  double seconds = 0;
};

int64_t mono_ns() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

void sleep_until(int64_t t_ns) {
  const timespec ts{static_cast<time_t>(t_ns / 1'000'000'000),
                    static_cast<long>(t_ns % 1'000'000'000)};
  while (::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) != 0) {
  }
}

bool parse_step(std::string_view text, Step& step) {
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos) return false;
  const std::string_view v = text.substr(0, colon);
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), step.value);
  if (ec != std::errc() || end != v.data() + v.size() || (step.value != 0 && step.value != 1))
    return false;
  const std::string s(text.substr(colon + 1));
  char* rest = nullptr;
  step.seconds = std::strtod(s.c_str(), &rest);
  return !s.empty() && rest != nullptr && *rest == '\0' && step.seconds >= 0 &&
         step.seconds <= 3600;
}

int usage(std::FILE* to, int status) {
  std::fprintf(to,
               "usage: switch-phases STATE_FILE VALUE:SECONDS...\n"
               "  Sets the state file's utilization_switch to each VALUE (0 or 1) in turn and\n"
               "  holds it SECONDS; waits up to 60 s for the file first.\n");
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0))
    return usage(stdout, 0);
  if (argc < 3) return usage(stderr, 2);
  const std::string path = argv[1];
  std::vector<Step> steps;
  for (int i = 2; i < argc; ++i) {
    Step s;
    if (!parse_step(argv[i], s)) {
      std::fprintf(stderr, "switch-phases: bad step '%s' (want VALUE:SECONDS, VALUE 0 or 1)\n",
                   argv[i]);
      return usage(stderr, 2);
    }
    steps.push_back(s);
  }

  // The library creates the file on the program's first CUDA call; until then
  // (or while it is half-written) the read fails.
  const int64_t give_up = mono_ns() + 60'000'000'000;
  hami::Result<hami::region::RegionSnapshot> snap = hami::region::read_snapshot(path);
  while (!snap && mono_ns() < give_up) {
    sleep_until(mono_ns() + 1'000'000);
    snap = hami::region::read_snapshot(path);
  }
  if (!snap) {
    std::fprintf(stderr, "switch-phases: no valid state file at %s after 60 s: %s\n", path.c_str(),
                 snap.error().message.c_str());
    return 3;
  }
  auto writer = hami::monitor::StateWriter::open(*snap);
  if (!writer) {
    std::fprintf(stderr, "switch-phases: %s\n", writer.error().message.c_str());
    return 3;
  }

  for (const Step& s : steps) {
    if (auto r = writer->set_utilization_switch(s.value); !r) {
      std::fprintf(stderr, "switch-phases: setting utilization_switch in %s: %s\n", path.c_str(),
                   r.error().message.c_str());
      return 4;
    }
    const int64_t now = mono_ns();
    std::printf("{\"switch\": %d, \"t_ns\": %lld}\n", s.value, static_cast<long long>(now));
    std::fflush(stdout);
    sleep_until(now + static_cast<int64_t>(s.seconds * 1e9));
  }
  return 0;
}
