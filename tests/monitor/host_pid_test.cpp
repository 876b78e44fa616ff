// Host-PID resolution: fixture /proc trees (nested namespaces, old kernels,
// broken and vanishing entries, zombies, the untagged cgroup fallback), the
// real /proc, a real PID namespace, and writing hostpid into a state file.
#include "monitor/host_pid.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "region/layout_v1.hpp"
#include "support/temp_dir.hpp"

namespace hami::monitor {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kPodA = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";   // v2, systemd driver
constexpr std::string_view kPodB = "11112222-3333-4444-5555-666677778888";   // v1, cgroupfs
constexpr std::string_view kPodC = "aaaabbbb-cccc-dddd-eeee-ffff00001111";   // nested namespaces
constexpr std::string_view kPodD = "d0d0d0d0-0000-4000-8000-000000000001";   // two containers
constexpr std::string_view kStaticPod = "6a3c2e0c8f1b4d5e9a7b3c2d1e0f9a8b";  // static pod hash

std::string underscored(std::string_view uid) {
  std::string s(uid);
  for (char& c : s)
    if (c == '-') c = '_';
  return s;
}

std::string cgroup_v2_systemd(std::string_view uid, std::string_view container) {
  return "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + underscored(uid) +
         ".slice/cri-containerd-" + std::string(container) + ".scope\n";
}

std::string cgroup_v1_cgroupfs(std::string_view uid, std::string_view container) {
  std::string path = "/kubepods/besteffort/pod" + std::string(uid) + "/" + std::string(container);
  return "12:pids:" + path + "\n11:memory:" + path + "\n4:cpu,cpuacct:" + path +
         "\n1:name=systemd:" + path + "\n0::/\n";
}

std::string stat_text(pid_t pid, char state, uint64_t start) {
  // A command with spaces and parentheses: fields are counted from the last ')'.
  std::string s = std::to_string(pid);
  s += " (my (odd) cmd) ";
  s.push_back(state);
  for (int field = 4; field <= 21; ++field) {
    s += ' ';
    s += std::to_string(field);
  }
  s += ' ';
  s += std::to_string(start);
  s += " 4096 100 18446744073709551615\n";
  return s;
}

std::string status_text(pid_t pid, std::string_view nspid_line) {
  std::string s = "Name:\tcmd\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t" + std::to_string(pid) +
                  "\nNgid:\t0\nPid:\t" + std::to_string(pid) + "\nPPid:\t1\n";
  if (!nspid_line.empty()) s += std::string(nspid_line) + "\n";
  s += "VmRSS:\t1024 kB\nThreads:\t1\n";
  return s;
}

void write_file(const std::string& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// A fake /proc in a temporary directory.
class FakeProc {
 public:
  const std::string& root() const { return dir_.path(); }

  // nspid: the NSpid line's values ("1001\t1"), or "" for a kernel without one.
  void add(pid_t pid, std::string_view nspid, uint64_t start, std::string_view cgroup,
           char state = 'S') {
    const std::string d = make_dir(pid);
    write_file(d + "/stat", stat_text(pid, state, start));
    write_file(d + "/status",
               status_text(pid, nspid.empty() ? "" : "NSpid:\t" + std::string(nspid)));
    write_file(d + "/cgroup", cgroup);
  }
  std::string make_dir(pid_t pid) {
    const std::string d = root() + "/" + std::to_string(pid);
    fs::create_directories(d);
    return d;
  }

 private:
  test::TempDir dir_;
};

// The host every fixture test scans.
class HostPidFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    p_.add(1, "1", 10, "0::/init.scope\n");
    // Pod A (cgroup v2, systemd driver): container pids 1 and 7.
    p_.add(1001, "1001\t1", 500, cgroup_v2_systemd(kPodA, "aaa"));
    p_.add(1007, "1007\t7", 520, cgroup_v2_systemd(kPodA, "aaa"));
    // Pod B (cgroup v1, cgroupfs driver): container pids 1 and 7 too.
    p_.add(2001, "2001\t1", 600, cgroup_v1_cgroupfs(kPodB, "bbb"));
    p_.add(2007, "2007 7", 620, cgroup_v1_cgroupfs(kPodB, "bbb"));  // spaces, not tabs
    // Pod C: a container inside a container (three levels).
    p_.add(3001, "3001\t40\t1", 700, cgroup_v2_systemd(kPodC, "ccc"));
    p_.add(3002, "3002\t41\t7", 710, cgroup_v2_systemd(kPodC, "ccc"));
    // A kernel without NSpid (before 4.1): the chain is the pid alone.
    p_.add(4000, "", 800, "");
    // A zombie in pod A.
    p_.add(5001, "5001\t9", 900, cgroup_v2_systemd(kPodA, "aaa"), 'Z');
    // Pod D: two containers of one pod, each with its own pid 1.
    p_.add(8001, "8001\t1", 1000, cgroup_v2_systemd(kPodD, "d1"));
    p_.add(8002, "8002\t1", 1010, cgroup_v2_systemd(kPodD, "d2"));
    // A static pod (hash UID, no dashes), cgroupfs driver.
    p_.add(9001, "9001\t1", 1100, cgroup_v1_cgroupfs(kStaticPod, "sss"));

    // Broken entries, all skipped.
    write_file(p_.make_dir(6000) + "/stat", "6000 no parenthesis S 1 2 3\n");
    write_file(p_.make_dir(6000) + "/status", status_text(6000, "NSpid:\t6000"));
    p_.add(6001, "6001\tabc", 100, "");
    write_file(p_.make_dir(6002) + "/stat", stat_text(6002, 'S', 100));     // no status
    p_.make_dir(6003);                                                      // vanished
    p_.add(6004, "9999\t1", 100, "");                                       // NSpid[0] != dir
    write_file(p_.make_dir(6005) + "/stat", std::string(100 * 1024, 'x'));  // too big
    write_file(p_.make_dir(6005) + "/status", status_text(6005, "NSpid:\t6005"));
    write_file(p_.make_dir(6006) + "/stat", "6006 (short) S 1 2\n");  // too few fields
    write_file(p_.make_dir(6006) + "/status", status_text(6006, "NSpid:\t6006"));
    p_.add(6007, "", 100, "");  // empty NSpid line below
    write_file(p_.root() + "/6007/status", "Name:\tx\nNSpid:\t\n");
    p_.add(6008, "6008\t1", 100, "");  // stat is a directory: unreadable
    fs::remove(p_.root() + "/6008/stat");
    fs::create_directories(p_.root() + "/6008/stat");
    // Not processes at all.
    fs::create_directories(p_.root() + "/self");
    fs::create_directories(p_.root() + "/12a");
    write_file(p_.root() + "/7000", "a regular file");
    fs::create_directories(p_.root() + "/sys/kernel");

    table_ = ProcTable::scan(p_.root());
  }

  std::optional<pid_t> tagged(pid_t pid, uint64_t start) {
    return resolve_host_pid(table_, pid, start, "").host_pid;
  }

  FakeProc p_;
  ProcTable table_;
};

TEST_F(HostPidFixture, ScanKeepsExactlyTheReadableProcesses) {
  std::vector<pid_t> pids;
  for (const auto& e : table_.entries())
    pids.push_back(e.host_pid);
  std::sort(pids.begin(), pids.end());
  EXPECT_EQ(pids, (std::vector<pid_t>{1, 1001, 1007, 2001, 2007, 3001, 3002, 4000, 5001, 8001, 8002,
                                      9001}));
  for (const auto& e : table_.entries()) {
    if (e.host_pid == 3001) {
      EXPECT_EQ(e.ns_pids, (std::vector<pid_t>{3001, 40, 1}));
      EXPECT_EQ(e.start_time, 700u);
      EXPECT_EQ(e.pod_uid, kPodC);
    }
    if (e.host_pid == 4000) {
      EXPECT_EQ(e.ns_pids, (std::vector<pid_t>{4000}));
      EXPECT_EQ(e.pod_uid, "");
    }
    if (e.host_pid == 2001) {
      EXPECT_EQ(e.pod_uid, kPodB);
    }
    if (e.host_pid == 5001) {
      EXPECT_TRUE(e.exited());
    }
  }
}

TEST_F(HostPidFixture, TaggedSlotsResolveByPidAndStartTime) {
  EXPECT_EQ(tagged(1, 500), 1001);
  EXPECT_EQ(tagged(7, 520), 1007);
  EXPECT_EQ(tagged(1, 600), 2001);
  EXPECT_EQ(tagged(7, 620), 2007);
  EXPECT_EQ(tagged(1, 700), 3001);  // innermost of three levels
  EXPECT_EQ(tagged(7, 710), 3002);
  EXPECT_EQ(tagged(1, 1000), 8001);
  EXPECT_EQ(tagged(1, 1010), 8002);
  EXPECT_EQ(tagged(1, 10), 1);               // the host namespace itself
  EXPECT_EQ(tagged(4000, 800), 4000);        // no NSpid line
  EXPECT_EQ(tagged(40, 700), std::nullopt);  // a middle level is not the container's pid
  EXPECT_EQ(tagged(3001, 700), std::nullopt);
}

TEST_F(HostPidFixture, TaggedMismatchesAreNotFound) {
  auto r = resolve_host_pid(table_, 1, 999, "");
  EXPECT_EQ(r.status, ResolveStatus::kNotFound);
  EXPECT_FALSE(r.host_pid);
  EXPECT_EQ(resolve_host_pid(table_, 7, 500, "").status, ResolveStatus::kNotFound);  // pid reused
  EXPECT_EQ(resolve_host_pid(table_, 12345, 500, "").status, ResolveStatus::kNotFound);
  EXPECT_EQ(resolve_host_pid(table_, 0, 500, "").status, ResolveStatus::kNotFound);
  EXPECT_EQ(resolve_host_pid(table_, -1, 500, "").status, ResolveStatus::kNotFound);
  // Broken entries never match.
  EXPECT_EQ(tagged(6001, 100), std::nullopt);
  EXPECT_EQ(tagged(1, 100), std::nullopt);  // 6004 (NSpid 9999 1) and 6008 were skipped
  EXPECT_FALSE(r.reason().empty());
}

TEST_F(HostPidFixture, ZombieIsReportedAsExited) {
  auto r = resolve_host_pid(table_, 9, 900, "");
  EXPECT_EQ(r.status, ResolveStatus::kExited);
  EXPECT_FALSE(r.host_pid);
  EXPECT_EQ(r.candidates, 1);
  EXPECT_EQ(resolve_host_pid(table_, 9, 0, kPodA).status, ResolveStatus::kExited);
}

TEST_F(HostPidFixture, UntaggedSlotsFallBackToThePodCgroup) {
  // v2 systemd form (underscores in the file), hint dashed, underscored or prefixed.
  EXPECT_EQ(resolve_host_pid(table_, 1, 0, kPodA).host_pid, 1001);
  EXPECT_EQ(resolve_host_pid(table_, 7, 0, underscored(kPodA)).host_pid, 1007);
  EXPECT_EQ(resolve_host_pid(table_, 1, 0, "pod" + underscored(kPodA)).host_pid, 1001);
  // v1 cgroupfs form (dashes in the file).
  EXPECT_EQ(resolve_host_pid(table_, 1, 0, kPodB).host_pid, 2001);
  EXPECT_EQ(resolve_host_pid(table_, 7, 0, underscored(kPodB)).host_pid, 2007);
  EXPECT_EQ(resolve_host_pid(table_, 7, 0, kPodC).host_pid, 3002);
  EXPECT_EQ(resolve_host_pid(table_, 1, 0, kStaticPod).host_pid, 9001);
  // Upper-case hint.
  std::string upper(kPodA);
  for (char& c : upper)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_EQ(resolve_host_pid(table_, 1, 0, upper).host_pid, 1001);

  auto none = resolve_host_pid(table_, 1, 0, "99999999-9999-9999-9999-999999999999");
  EXPECT_EQ(none.status, ResolveStatus::kNotFound);
  EXPECT_EQ(resolve_host_pid(table_, 8, 0, kPodA).status, ResolveStatus::kNotFound);
  auto nohint = resolve_host_pid(table_, 1, 0, "");
  EXPECT_EQ(nohint.status, ResolveStatus::kNoHint);
  EXPECT_FALSE(nohint.host_pid);
}

TEST_F(HostPidFixture, UntaggedAmbiguityGivesNoAnswer) {
  auto r = resolve_host_pid(table_, 1, 0, kPodD);  // two containers of one pod
  EXPECT_EQ(r.status, ResolveStatus::kAmbiguous);
  EXPECT_EQ(r.candidates, 2);
  EXPECT_FALSE(r.host_pid);
  EXPECT_EQ(r.reason(), "several processes match");
}

TEST(HostPidScan, MissingRootGivesAnEmptyTable) {
  auto t = ProcTable::scan("/nonexistent/proc/root");
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(resolve_host_pid(t, 1, 5, "").status, ResolveStatus::kNotFound);
}

TEST(HostPidParse, NSpidLine) {
  auto none = parse_nspid("Name:\tx\nPid:\t5\n");
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->has_value());
  auto three = parse_nspid("Name:\tx\nNSpid:\t300\t20\t1\nNSpgid:\t1\n");
  ASSERT_TRUE(three);
  ASSERT_TRUE(three->has_value());
  EXPECT_EQ(**three, (std::vector<pid_t>{300, 20, 1}));
  auto last = parse_nspid("NSpid:\t42");  // no trailing newline
  ASSERT_TRUE(last);
  EXPECT_EQ(**last, (std::vector<pid_t>{42}));
  EXPECT_FALSE(parse_nspid("NSpid:\t1\tx\n"));
  EXPECT_FALSE(parse_nspid("NSpid:\t\n"));
  EXPECT_FALSE(parse_nspid("NSpid:\t-3\n"));
  EXPECT_FALSE(parse_nspid("NSpid:\t99999999999999999999\n"));
  // "NSpid" only counts at the start of a line.
  auto inner = parse_nspid("Name:\tNSpid:\t5\n");
  ASSERT_TRUE(inner);
  EXPECT_FALSE(inner->has_value());
}

TEST(HostPidParse, PodUidInCgroupText) {
  EXPECT_EQ(extract_pod_uid(cgroup_v2_systemd(kPodA, "x")), kPodA);
  EXPECT_EQ(extract_pod_uid(cgroup_v1_cgroupfs(kPodB, "y")), kPodB);
  EXPECT_EQ(extract_pod_uid(cgroup_v1_cgroupfs(kStaticPod, "z")), kStaticPod);
  EXPECT_EQ(extract_pod_uid("0::/init.scope\n"), "");
  EXPECT_EQ(extract_pod_uid("0::/kubepods.slice/kubepods-besteffort.slice\n"), "");
  EXPECT_EQ(extract_pod_uid("0::/podtooshort/x\n"), "");
  EXPECT_EQ(extract_pod_uid(""), "");

  const std::string v2 = cgroup_v2_systemd(kPodA, "x");
  const std::string v1 = cgroup_v1_cgroupfs(kPodA, "x");
  for (const std::string& text : {v2, v1}) {
    EXPECT_TRUE(cgroup_mentions_pod(text, kPodA));
    EXPECT_TRUE(cgroup_mentions_pod(text, underscored(kPodA)));
    EXPECT_TRUE(cgroup_mentions_pod(text, "pod" + std::string(kPodA)));
    EXPECT_FALSE(cgroup_mentions_pod(text, kPodB));
    EXPECT_FALSE(cgroup_mentions_pod(text, ""));
    EXPECT_FALSE(cgroup_mentions_pod(text, "pod"));
  }
}

// Entries with no pod UID that extract_pod_uid recognises still match by text.
TEST(HostPidParse, FallbackMatchesRawCgroupTextWithoutAnExtractableUid) {
  ProcEntry e;
  e.host_pid = 500;
  e.ns_pids = {500, 1};
  e.start_time = 5;
  e.cgroup = "0::/custom/podmy-short-id\n";
  auto t = ProcTable::from_entries({e});
  EXPECT_EQ(t.entries()[0].pod_uid, "");
  EXPECT_EQ(resolve_host_pid(t, 1, 0, "my-short-id").host_pid, 500);
  EXPECT_EQ(resolve_host_pid(t, 1, 0, "my_short_id").host_pid, 500);
  EXPECT_EQ(resolve_host_pid(t, 1, 0, "other").status, ResolveStatus::kNotFound);
}

// 1,024 containers of 4 processes on a host of about 5,000.
TEST(HostPidScale, ResolvesAThousandContainersQuickly) {
  std::vector<ProcEntry> entries;
  std::vector<std::string> pods;
  pid_t next = 100;
  const pid_t inner[] = {1, 7, 20, 21};
  for (int c = 0; c < 1024; ++c) {
    char uid[40];
    std::snprintf(uid, sizeof uid, "%08x-0000-4000-8000-%012x", static_cast<unsigned>(c),
                  static_cast<unsigned>(c));
    pods.emplace_back(uid);
    for (pid_t p : inner) {
      ProcEntry e;
      e.host_pid = next++;
      e.ns_pids = {e.host_pid, p};
      e.start_time = static_cast<uint64_t>(e.host_pid) * 3;
      e.cgroup = cgroup_v2_systemd(uid, "c");
      entries.push_back(std::move(e));
    }
  }
  for (int h = 0; h < 900; ++h) {
    ProcEntry e;
    e.host_pid = next++;
    e.start_time = static_cast<uint64_t>(e.host_pid) * 3;
    entries.push_back(std::move(e));
  }
  auto t = ProcTable::from_entries(std::move(entries));
  ASSERT_EQ(t.size(), 1024u * 4 + 900);

  const auto begin = std::chrono::steady_clock::now();
  int ok = 0;
  for (int c = 0; c < 1024; ++c) {
    for (int k = 0; k < 4; ++k) {
      const pid_t host = 100 + c * 4 + k;
      auto r = resolve_host_pid(t, inner[k], static_cast<uint64_t>(host) * 3, "");
      ok += r.host_pid == host;
    }
    auto u = resolve_host_pid(t, 1, 0, pods[static_cast<size_t>(c)]);  // untagged
    ok += u.host_pid == 100 + c * 4;
  }
  const auto elapsed = std::chrono::steady_clock::now() - begin;
  EXPECT_EQ(ok, 1024 * 5);
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(elapsed).count();
  std::printf("5120 resolutions over %zu processes: %lld us\n", t.size(),
              static_cast<long long>(us));
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  EXPECT_LT(us, 100'000);  // instrumented builds are several times slower
#else
  EXPECT_LT(us, 10'000);
#endif
}

TEST(HostPidRealProc, ThisProcessResolvesToItself) {
  auto me = region::self_identity();
  ASSERT_TRUE(me) << me.error().message;
  auto t = ProcTable::scan();
  ASSERT_GT(t.size(), 0u);
  auto r = resolve_host_pid(t, me->pid, me->start_time, "");
  EXPECT_EQ(r.status, ResolveStatus::kResolved) << r.reason();
  EXPECT_EQ(r.host_pid, ::getpid());
}

// Reads exactly n bytes within the timeout; false on EOF, error or timeout.
bool read_full(int fd, void* buf, size_t n, int timeout_ms) {
  auto* p = static_cast<std::byte*>(buf);
  size_t got = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (got < n) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) return false;
    pollfd pfd{fd, POLLIN, 0};
    const int pr = ::poll(&pfd, 1, static_cast<int>(left));
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) return false;
    const ssize_t r = ::read(fd, p + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    got += static_cast<size_t>(r);
  }
  return true;
}

struct NsReport {
  int err = 0;              // errno of a failed unshare or fork, else 0
  pid_t grandchild = 0;     // as seen from our namespace
  pid_t inner_pid = 0;      // as seen from inside the new namespace
  uint64_t start_time = 0;  // from the grandchild's /proc/self/stat
};

// Closes the release pipe (the grandchild exits on EOF), kills the grandchild
// and reaps the middle child, whatever happened in the test.
struct NsChildren {
  pid_t middle = -1;
  pid_t grandchild = -1;
  int release_w = -1;
  int report_r = -1;
  ~NsChildren() {
    if (release_w >= 0) ::close(release_w);
    if (report_r >= 0) ::close(report_r);
    if (grandchild > 0) ::kill(grandchild, SIGKILL);
    if (middle > 0) {
      for (int i = 0; i < 500; ++i) {
        if (::waitpid(middle, nullptr, WNOHANG) == middle) return;
        ::usleep(10'000);
      }
      ::kill(middle, SIGKILL);
      ::waitpid(middle, nullptr, 0);
    }
  }
};

TEST(HostPidRealProc, ResolvesAcrossARealPidNamespace) {
  int report[2];
  int release[2];
  ASSERT_EQ(::pipe2(report, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(release, O_CLOEXEC), 0);
  NsChildren kids;
  kids.release_w = release[1];
  kids.report_r = report[0];

  kids.middle = ::fork();
  ASSERT_GE(kids.middle, 0);
  if (kids.middle == 0) {
    ::close(report[0]);
    ::close(release[1]);
    NsReport rep;
    int ok = ::unshare(CLONE_NEWPID);
    if (ok != 0 && errno == EPERM) ok = ::unshare(CLONE_NEWUSER | CLONE_NEWPID);  // rootless
    if (ok != 0) {
      rep.err = errno;
      (void)!::write(report[1], &rep, sizeof rep);
      _exit(0);
    }
    int inner[2];
    if (::pipe(inner) != 0) _exit(1);
    const pid_t g = ::fork();
    if (g == 0) {
      ::close(inner[0]);
      NsReport mine;
      auto id = region::self_identity();
      if (id) {
        mine.inner_pid = id->pid;
        mine.start_time = id->start_time;
      }
      (void)!::write(inner[1], &mine, sizeof mine);
      char c;
      while (::read(release[0], &c, 1) < 0 && errno == EINTR) {
      }
      _exit(0);
    }
    ::close(inner[1]);
    if (g < 0) {
      rep.err = errno;
    } else {
      rep.grandchild = g;
      NsReport from_inner;
      if (read_full(inner[0], &from_inner, sizeof from_inner, 10'000)) {
        rep.inner_pid = from_inner.inner_pid;
        rep.start_time = from_inner.start_time;
      }
    }
    (void)!::write(report[1], &rep, sizeof rep);
    if (g > 0) ::waitpid(g, nullptr, 0);
    _exit(0);
  }
  ::close(report[1]);
  ::close(release[0]);

  NsReport rep;
  ASSERT_TRUE(read_full(report[0], &rep, sizeof rep, 10'000)) << "no report from the child";
  kids.grandchild = rep.grandchild;
  if (rep.err == EPERM || rep.err == EINVAL || rep.err == ENOSPC || rep.err == EUSERS) {
    GTEST_SKIP() << "cannot create a PID namespace here: " << std::strerror(rep.err);
  }
  ASSERT_EQ(rep.err, 0) << std::strerror(rep.err);
  ASSERT_GT(rep.grandchild, 0);
  ASSERT_EQ(rep.inner_pid, 1);  // init of the new namespace
  ASSERT_NE(rep.start_time, 0u);

  auto t = ProcTable::scan();
  auto r = resolve_host_pid(t, rep.inner_pid, rep.start_time, "");
  EXPECT_EQ(r.status, ResolveStatus::kResolved) << r.reason();
  EXPECT_EQ(r.host_pid, rep.grandchild);
  for (const auto& e : t.entries()) {
    if (e.host_pid == rep.grandchild) {
      EXPECT_GE(e.ns_pids.size(), 2u);
      EXPECT_EQ(e.ns_pids.back(), 1);
    }
  }
}

}  // namespace
}  // namespace hami::monitor
