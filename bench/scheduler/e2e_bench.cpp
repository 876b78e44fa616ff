// The end-to-end scheduling benchmark's driver (bench/scheduler/e2e.sh runs
// it): on the real control plane of tests/e2e/ it publishes fake GPU nodes,
// stands in for the device plugin after Allocate, creates pods at once and
// measures how fast kube-scheduler places them, with and without our
// webhook and extender.
//
//   scheduler-e2e-bench nodes --kubeconfig K --count 500
//   scheduler-e2e-bench standin --kubeconfig K            (until SIGTERM)
//   scheduler-e2e-bench run --kubeconfig K --mode ours --pods 2000 --namespace r1
//       --cpu etcd=/tmp/hami-e2e/pids/etcd.pid ... >> raw.jsonl
//   scheduler-e2e-bench clean --kubeconfig K --namespace r1
//   scheduler-e2e-bench report raw.jsonl
//
// Nodes are Node objects as kubelet and our device plugin publish them (8
// H200 in hami.io/node-nvidia-register, Ready, untainted) with no kubelet
// behind them. The stand-in makes, for every pod bound to them, the patches
// our device plugin makes after Allocate: the pod's annotations (bind-phase
// success) and the node lock's release.
#include <httplib.h>
#include <signal.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <deque>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "deviceplugin/pod_devices.hpp"
#include "k8s/client.hpp"
#include "k8s/config.hpp"
#include "k8s/paths.hpp"
#include "protocol/annotations.hpp"
#include "protocol/node_lock.hpp"
#include "protocol/node_register.hpp"

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
namespace proto = hami::protocol;

constexpr const char* kNodePrefix = "bench-node-";
constexpr const char* kPlainResource = "example.com/gpu";
constexpr const char* kBenchLabel = "hami-bench";
constexpr int kGpusPerNode = 8;
constexpr int kH200MiB = 143771;  // what NVML reports for an H200

[[noreturn]] void die(const std::string& m) {
  std::cerr << "scheduler-e2e-bench: " << m << "\n";
  std::exit(1);
}

hami::k8s::Client make_client(const std::string& kubeconfig, size_t connections) {
  auto cfg = hami::k8s::Config::from_kubeconfig(kubeconfig);
  if (!cfg) die("kubeconfig " + kubeconfig + ": " + cfg.error().message);
  hami::k8s::ClientOptions o;
  o.max_idle_connections = connections;
  o.user_agent = "scheduler-e2e-bench";
  auto c = hami::k8s::Client::from_config(*cfg, o);
  if (!c) die("client: " + c.error().message);
  return std::move(*c);
}

std::string node_name(int i) {
  char b[32];
  std::snprintf(b, sizeof b, "%s%05d", kNodePrefix, i);
  return b;
}

std::string rfc3339_now() {
  char buf[32];
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Runs f(i) for i in [0, n) on `threads` threads.
template <class F>
void parallel(int n, int threads, F&& f) {
  std::atomic<int> next{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&] {
      for (int i = next++; i < n; i = next++)
        f(i);
    });
  }
  for (auto& t : ts)
    t.join();
}

// --- nodes -------------------------------------------------------------------

std::string publish_node(hami::k8s::Client& cl, int index) {
  const std::string name = node_name(index);
  std::vector<proto::NodeDevice> devs;
  for (int g = 0; g < kGpusPerNode; ++g) {
    char uuid[64];
    std::snprintf(uuid, sizeof uuid, "GPU-%08x-0000-4000-8000-%012x", index, g);
    devs.push_back({.id = uuid,
                    .index = g,
                    .count = 10,
                    .devmem = kH200MiB,
                    .devcore = 100,
                    .type = proto::device_type("NVIDIA H200"),
                    .numa = g / 4,
                    .mode = proto::kModeHamiCore,
                    .health = true});
  }
  const json node = {
      {"apiVersion", "v1"},
      {"kind", "Node"},
      {"metadata",
       {{"name", name},
        {"labels", {{"kubernetes.io/hostname", name}, {"kubernetes.io/os", "linux"}}},
        {"annotations",
         {{proto::kNodeRegister, proto::encode_node_devices(devs)},
          {proto::kNodeHandshake, std::string(proto::kHandshakeReported) + rfc3339_now()}}}}}};
  auto made = cl.create(hami::k8s::node_path(), node);
  if (!made && made.error().already_exists()) return "";  // from an earlier call
  if (!made) return "create " + name + ": " + made.error().message;
  const std::string now = rfc3339_now();
  const json resources = {{"cpu", "64"},
                          {"memory", "512Gi"},
                          {"pods", "110"},
                          {"nvidia.com/gpu", std::to_string(kGpusPerNode * 10)},
                          {kPlainResource, std::to_string(kGpusPerNode)}};
  const json status = {
      {"status",
       {{"capacity", resources},
        {"allocatable", resources},
        {"conditions", json::array({{{"type", "Ready"},
                                     {"status", "True"},
                                     {"reason", "KubeletReady"},
                                     {"message", "kubelet is posting ready status"},
                                     {"lastHeartbeatTime", now},
                                     {"lastTransitionTime", now}}})}}}};
  if (auto s = cl.merge_patch(hami::k8s::core_path("nodes", "", name, "status"), status); !s)
    return "status of " + name + ": " + s.error().message;
  // TaintNodesByCondition gave it the not-ready taint; no node lifecycle
  // controller runs to lift it.
  if (auto t = cl.merge_patch(hami::k8s::node_path(name), {{"spec", {{"taints", nullptr}}}}); !t)
    return "taints of " + name + ": " + t.error().message;
  return "";
}

int cmd_nodes(const std::string& kubeconfig, int count, int threads) {
  auto cl = make_client(kubeconfig, static_cast<size_t>(threads));
  std::mutex mu;
  std::string first_error;
  const auto t0 = Clock::now();
  parallel(count, threads, [&](int i) {
    if (std::string e = publish_node(cl, i); !e.empty()) {
      std::lock_guard lk(mu);
      if (first_error.empty()) first_error = e;
    }
  });
  if (!first_error.empty()) die(first_error);
  std::cerr << "scheduler-e2e-bench: " << count << " nodes published in "
            << std::chrono::duration<double>(Clock::now() - t0).count() << " s\n";
  return 0;
}

// Marks every bench node as served by a plugin that matches pods
// (hami.io/node-allocate-protocol, docs/scheduler-protocol.md) or removes the
// mark (upstream's lock).
int cmd_protocol(const std::string& kubeconfig, const std::string& protocol, int threads) {
  auto cl = make_client(kubeconfig, static_cast<size_t>(threads));
  auto nodes = cl.list(hami::k8s::node_path());
  if (!nodes) die("list nodes: " + nodes.error().message);
  std::vector<std::string> names;
  for (const json& n : nodes->items) {
    const std::string name = n["metadata"].value("name", "");
    if (name.rfind(kNodePrefix, 0) == 0) names.push_back(name);
  }
  const json value = protocol == "lock" ? json(nullptr) : json(proto::kAllocateMatchPods);
  std::atomic<int> failed{0};
  parallel(static_cast<int>(names.size()), threads, [&](int i) {
    auto r =
        cl.merge_patch(hami::k8s::node_path(names[static_cast<size_t>(i)]),
                       {{"metadata", {{"annotations", {{proto::kNodeAllocateProtocol, value}}}}}});
    if (!r) ++failed;
  });
  if (failed) die(std::to_string(failed.load()) + " nodes could not be marked");
  std::cerr << "scheduler-e2e-bench: " << names.size() << " nodes: protocol " << protocol << "\n";
  return 0;
}

// --- the device plugin's side ------------------------------------------------

std::atomic<bool> g_stop{false};

void on_signal(int) {
  g_stop = true;
}

struct Work {
  std::string ns, name, uid, node, to_allocate;
  int attempts = 0;
  Clock::time_point ready;  // seen bound + the hold: kubelet's admission and Allocate
};

class StandIn {
 public:
  // `hold`: from a pod seen bound to its patches (a real node took 1.2-1.7
  // s); `lock`: upstream's protocol, one pod per node at a time and the
  // node lock released after, else match-pods (no lock, any number).
  StandIn(hami::k8s::Client& cl, int workers, std::chrono::milliseconds hold, bool lock)
      : cl_(cl), hold_(hold), lock_(lock) {
    for (int i = 0; i < workers; ++i)
      workers_.emplace_back([this] { work(); });
  }
  ~StandIn() {
    {
      std::lock_guard lk(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    for (auto& w : workers_)
      w.join();
  }

  // A pod event: queued once per UID when bound and allocating.
  void seen(const json& pod) {
    const json& md = pod["metadata"];
    const std::string node = pod["spec"].value("nodeName", "");
    if (node.empty()) return;
    const json an = md.value("annotations", json::object());
    if (an.value(proto::kBindPhase, "") != proto::kPhaseAllocating) return;
    const std::string uid = md.value("uid", "");
    std::lock_guard lk(mu_);
    if (!queued_.insert(uid).second) return;
    if (queued_.size() > 100000) queued_.clear();
    queue_.push_back({md.value("namespace", ""), md.value("name", ""), uid, node,
                      an.value(proto::kDevicesToAllocate, ""), 0, Clock::now() + hold_});
    cv_.notify_one();
  }

  void report() const {
    std::cerr << "scheduler-e2e-bench standin: " << done_ << " pods allocated, " << failed_
              << " given up\n";
  }

 private:
  void work() {
    for (;;) {
      Work w;
      {
        std::unique_lock lk(mu_);
        for (;;) {
          if (quit_) return;
          // Under the lock one pod per node is in flight (the scheduler
          // binds the next once this one's lock is released); with
          // match-pods kubelet's admissions overlap.
          const auto now = Clock::now();
          auto next_ready = now + 100ms;
          auto it = std::find_if(queue_.begin(), queue_.end(), [&](const Work& x) {
            if (lock_ && busy_.count(x.node)) return false;
            if (x.ready > now) {
              next_ready = std::min(next_ready, x.ready);
              return false;
            }
            return true;
          });
          if (it != queue_.end()) {
            w = std::move(*it);
            queue_.erase(it);
            busy_.insert(w.node);
            break;
          }
          cv_.wait_until(lk, next_ready);
        }
      }
      const bool ok = allocate(w);
      std::lock_guard lk(mu_);
      busy_.erase(w.node);
      w.ready = Clock::now();
      if (ok) {
        ++done_;
      } else if (++w.attempts < 50) {
        queue_.push_back(std::move(w));
      } else {
        ++failed_;
        std::cerr << "scheduler-e2e-bench standin: gave up on " << w.ns << "/" << w.name << "\n";
      }
      cv_.notify_all();
    }
  }

  // The patches our device plugin makes once Allocate has served the pod
  // (allocator.cpp), as it makes them: one merge patch of the pod's
  // annotations and its hami.io/vgpu-node label, pinned to its UID, and the
  // node lock's release (read, then patched with its resourceVersion). Its
  // lookups of the pending pod, like kubelet's own traffic, are left out.
  bool allocate(const Work& w) {
    proto::PodDevices left;
    if (auto d = proto::decode_pod_devices(w.to_allocate)) left = std::move(*d);
    for (auto& c : left)
      c.clear();
    auto remaining = proto::encode_pod_devices(left);
    if (!remaining) return false;
    auto patched = cl_.merge_patch(hami::k8s::pod_path(w.ns, w.name),
                                   {{"metadata",
                                     {{"uid", w.uid},
                                      {"annotations",
                                       {{proto::kDevicesToAllocate, *remaining},
                                        {proto::kBindPhase, std::string(proto::kPhaseSuccess)}}},
                                      {"labels", {{proto::kAssignedNode, w.node}}}}}});
    if (!patched) return false;
    if (!lock_) return true;  // match-pods: no lock to release
    auto released = cl_.read_modify_patch(
        hami::k8s::node_path(w.node),
        [&](const json& node) -> hami::k8s::Result<std::optional<json>> {
          const json an = node["metadata"].value("annotations", json::object());
          auto it = an.find(proto::kNodeLock);
          if (it == an.end() || !it->is_string()) return std::optional<json>();
          auto lock = proto::parse_node_lock(it->get<std::string>());
          if (!lock || (lock->names_pod() && !lock->held_by(w.ns, w.name)))
            return std::optional<json>();
          return std::optional<json>(
              json{{"metadata", {{"annotations", {{proto::kNodeLock, nullptr}}}}}});
        });
    if (!released) {
      std::cerr << "scheduler-e2e-bench standin: release " << w.node << ": "
                << released.error().message << "\n";
    }
    return true;
  }

  hami::k8s::Client& cl_;
  std::chrono::milliseconds hold_;
  bool lock_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Work> queue_;
  std::set<std::string> queued_;
  std::set<std::string> busy_;
  bool quit_ = false;
  std::atomic<long> done_{0}, failed_{0};
  std::vector<std::thread> workers_;
};

// Follows pods with `selector` (list, then watch from its resourceVersion,
// resuming) and hands each object to `on_pod` until g_stop or `stop`.
void follow_pods(hami::k8s::Client& cl, const std::string& path, const std::string& selector,
                 const std::function<void(const json&)>& on_pod, std::stop_token stop) {
  std::string rv;
  while (!g_stop && !stop.stop_requested()) {
    if (rv.empty()) {
      auto l = cl.list(path, {.label_selector = selector});
      if (!l) {
        std::cerr << "scheduler-e2e-bench: list pods: " << l.error().message << "\n";
        std::this_thread::sleep_for(500ms);
        continue;
      }
      for (const json& p : l->items)
        on_pod(p);
      rv = l->resource_version;
    }
    auto end = cl.watch(
        path, {.resource_version = rv, .label_selector = selector, .timeout_seconds = 300},
        [&](const hami::k8s::WatchEvent& e) {
          const std::string v = e.object["metadata"].value("resourceVersion", "");
          if (!v.empty()) rv = v;
          if (e.type == hami::k8s::WatchEvent::Type::kAdded ||
              e.type == hami::k8s::WatchEvent::Type::kModified)
            on_pod(e.object);
          return !g_stop;
        },
        stop);
    if (!end) {
      std::cerr << "scheduler-e2e-bench: watch pods: " << end.error().message << "\n";
      std::this_thread::sleep_for(200ms);
    } else if (*end == hami::k8s::WatchEnd::kExpired) {
      rv.clear();
    }
  }
}

int cmd_standin(const std::string& kubeconfig, int workers, double hold_s,
                const std::string& protocol) {
  signal(SIGTERM, on_signal);
  signal(SIGINT, on_signal);
  auto cl = make_client(kubeconfig, static_cast<size_t>(workers) + 2);
  StandIn s(cl, workers, std::chrono::milliseconds(static_cast<int64_t>(hold_s * 1000)),
            protocol == "lock");
  std::jthread watcher([&](std::stop_token st) {
    follow_pods(
        cl, hami::k8s::pod_path(""), std::string(kBenchLabel) + "=ours",
        [&](const json& p) { s.seen(p); }, st);
  });
  while (!g_stop)
    std::this_thread::sleep_for(100ms);
  watcher.request_stop();
  s.report();
  return 0;
}

// --- measurements --------------------------------------------------------------

double cpu_seconds(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(f)), {});
  const size_t rp = s.rfind(')');
  if (rp == std::string::npos) return -1;
  std::istringstream in(s.substr(rp + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  // Fields 3.. after the command; utime and stime are fields 14 and 15.
  for (int i = 3; i <= 15 && in >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// CPU seconds the whole machine spent busy (every core), from /proc/stat.
double machine_busy_seconds() {
  std::ifstream f("/proc/stat");
  std::string cpu;
  unsigned long long v[8] = {};
  f >> cpu;
  for (auto& x : v)
    f >> x;
  // user nice system idle iowait irq softirq steal
  const unsigned long long busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
  return static_cast<double>(busy) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

pid_t read_pid(const std::string& pid_file) {
  std::ifstream f(pid_file);
  long pid = 0;
  f >> pid;
  return static_cast<pid_t>(pid);
}

// Sum of the samples of `name` whose labels contain every one of `labels`.
double metric(const std::string& text, const std::string& name,
              const std::vector<std::string>& labels = {}) {
  double sum = 0;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line.compare(0, name.size(), name) != 0) continue;
    const char next = line.size() > name.size() ? line[name.size()] : ' ';
    if (next != '{' && next != ' ') continue;
    bool all = true;
    for (const auto& l : labels)
      all = all && line.find(l) != std::string::npos;
    if (!all) continue;
    const size_t sp = line.rfind(' ');
    try {
      sum += std::stod(line.substr(sp + 1));
    } catch (const std::exception&) {
    }
  }
  return sum;
}

std::string scrape(const std::string& url) {
  if (url.empty()) return "";
  // http://host:port/path
  const size_t p = url.find("://");
  const std::string rest = p == std::string::npos ? url : url.substr(p + 3);
  const size_t slash = rest.find('/');
  httplib::Client c(rest.substr(0, slash));
  c.set_read_timeout(10, 0);
  auto r = c.Get(slash == std::string::npos ? "/" : rest.substr(slash));
  if (!r || r->status != 200) return "";
  return r->body;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  return v[i];
}

json pod_manifest(const std::string& mode, const std::string& ns, int i) {
  char name[32];
  std::snprintf(name, sizeof name, "p-%05d", i);
  json limits;
  json labels = {{kBenchLabel, mode}};
  if (mode == "ours") {
    // Four per GPU (cores), 32 per node.
    limits = {
        {"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "20000"}, {"nvidia.com/gpucores", "25"}};
  } else {
    limits = {{kPlainResource, "1"}};
    labels["hami.io/webhook"] = "ignore";  // kube-scheduler alone: no webhook call either
  }
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", ns}, {"labels", labels}}},
          {"spec",
           {{"terminationGracePeriodSeconds", 0},
            {"containers",
             json::array(
                 {{{"name", "main"}, {"image", "bench"}, {"resources", {{"limits", limits}}}}})}}}};
}

struct RunOptions {
  std::string kubeconfig, mode, ns, label;
  std::string variant;  // e.g. "match-pods, hold 1.5 s": rows of one label apart
  int pods = 0, threads = 16, timeout_s = 900;
  std::vector<std::string> cpu;  // name=pidfile
  std::string scheduler_metrics, hami_metrics;
};

// Checks that no GPU holds more than it has: per UUID, the cores, memory and
// slots the bound pods' allocations add up to.
json check_allocations(hami::k8s::Client& cl, const std::string& ns) {
  auto l = cl.list(hami::k8s::pod_path(ns));
  json out = {{"pods_checked", 0},
              {"gpus_used", 0},
              {"gpus_over", 0},
              {"nodes_used", 0},
              {"bind_phase_success", 0}};
  if (!l) return out;
  struct Use {
    int cores = 0, slots = 0;
    long mem = 0;
  };
  std::map<std::string, Use> use;
  std::set<std::string> nodes;
  int checked = 0, success = 0;
  for (const json& p : l->items) {
    const json an = p["metadata"].value("annotations", json::object());
    const std::string node = p["spec"].value("nodeName", "");
    if (!node.empty()) nodes.insert(node);
    if (an.value(proto::kBindPhase, "") == proto::kPhaseSuccess) ++success;
    auto it = an.find(proto::kDevicesAllocated);
    if (it == an.end()) continue;
    auto devs = proto::decode_pod_devices(it->get<std::string>());
    if (!devs) continue;
    ++checked;
    for (const auto& c : *devs)
      for (const auto& d : c) {
        Use& u = use[d.uuid];
        u.cores += d.cores;
        u.mem += d.mem_mib;
        ++u.slots;
      }
  }
  int over = 0;
  for (const auto& [uuid, u] : use)
    over += u.cores > 100 || u.mem > kH200MiB || u.slots > 10;
  out["pods_checked"] = checked;
  out["gpus_used"] = use.size();
  out["gpus_over"] = over;
  out["nodes_used"] = nodes.size();
  out["bind_phase_success"] = success;
  return out;
}

int cmd_run(const RunOptions& o) {
  auto cl = make_client(o.kubeconfig, static_cast<size_t>(o.threads) + 2);
  auto made =
      cl.create(hami::k8s::core_path("namespaces"),
                {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", o.ns}}}});
  if (!made && !made.error().already_exists()) die("namespace: " + made.error().message);

  std::vector<std::pair<std::string, pid_t>> procs;
  for (const auto& c : o.cpu) {
    const size_t eq = c.find('=');
    if (eq == std::string::npos) die("--cpu wants name=pidfile: " + c);
    const pid_t pid = read_pid(c.substr(eq + 1));
    if (pid <= 0) die("no pid in " + c.substr(eq + 1));
    procs.emplace_back(c.substr(0, eq), pid);
  }
  procs.emplace_back("bench-driver", getpid());
  std::vector<double> cpu0;
  for (const auto& [n, pid] : procs)
    cpu0.push_back(cpu_seconds(pid));
  const double busy0 = machine_busy_seconds();
  const std::string ks0 = scrape(o.scheduler_metrics), hs0 = scrape(o.hami_metrics);

  const int n = o.pods;
  std::vector<Clock::time_point> created(static_cast<size_t>(n)), bound(static_cast<size_t>(n));
  std::vector<char> is_bound(static_cast<size_t>(n), 0);
  std::mutex mu;
  std::condition_variable cv;
  int n_bound = 0;
  auto index_of = [](const std::string& name) {
    return name.size() == 7 && name.compare(0, 2, "p-") == 0 ? std::stoi(name.substr(2)) : -1;
  };
  std::jthread watcher([&](std::stop_token st) {
    follow_pods(
        cl, hami::k8s::pod_path(o.ns), std::string(kBenchLabel) + "=" + o.mode,
        [&](const json& p) {
          if (p["spec"].value("nodeName", "").empty()) return;
          const int i = index_of(p["metadata"].value("name", ""));
          if (i < 0 || i >= n) return;
          const auto now = Clock::now();
          std::lock_guard lk(mu);
          if (is_bound[static_cast<size_t>(i)]) return;
          is_bound[static_cast<size_t>(i)] = 1;
          bound[static_cast<size_t>(i)] = now;
          ++n_bound;
          cv.notify_all();
        },
        st);
  });
  std::this_thread::sleep_for(300ms);  // the watch is open before the first pod

  const auto t0 = Clock::now();
  std::atomic<int> create_errors{0};
  std::string first_create_error;
  parallel(n, o.threads, [&](int i) {
    created[static_cast<size_t>(i)] = Clock::now();
    auto r = cl.create(hami::k8s::pod_path(o.ns), pod_manifest(o.mode, o.ns, i));
    if (!r) {
      if (create_errors++ == 0) {
        std::lock_guard lk(mu);
        first_create_error = r.error().message;
      }
    }
  });
  const double create_s = std::chrono::duration<double>(Clock::now() - t0).count();
  {
    std::unique_lock lk(mu);
    cv.wait_for(lk, std::chrono::seconds(o.timeout_s),
                [&] { return n_bound + create_errors.load() >= n; });
  }
  std::vector<double> cpu1;
  for (const auto& [name, pid] : procs)
    cpu1.push_back(cpu_seconds(pid));
  const double busy1 = machine_busy_seconds();
  const std::string ks1 = scrape(o.scheduler_metrics), hs1 = scrape(o.hami_metrics);
  watcher.request_stop();

  std::vector<double> lat;
  Clock::time_point last = t0;
  {
    std::lock_guard lk(mu);
    for (int i = 0; i < n; ++i) {
      if (!is_bound[static_cast<size_t>(i)]) continue;
      lat.push_back(std::chrono::duration<double>(bound[static_cast<size_t>(i)] -
                                                  created[static_cast<size_t>(i)])
                        .count());
      last = std::max(last, bound[static_cast<size_t>(i)]);
    }
  }
  const double span = std::chrono::duration<double>(last - t0).count();
  json r = {{"label", o.label},
            {"mode", o.mode},
            {"variant", o.variant},
            {"pods", n},
            {"bound", lat.size()},
            {"create_errors", create_errors.load()},
            {"create_s", create_s},
            {"span_s", span},
            {"pods_per_s", span > 0 ? static_cast<double>(lat.size()) / span : 0},
            {"latency_p50_s", percentile(lat, 0.50)},
            {"latency_p90_s", percentile(lat, 0.90)},
            {"latency_p99_s", percentile(lat, 0.99)},
            {"latency_max_s", percentile(lat, 1.0)}};
  if (!first_create_error.empty()) r["first_create_error"] = first_create_error;
  json cpu = json::object();
  for (size_t i = 0; i < procs.size(); ++i)
    cpu[procs[i].first] = cpu1[i] - cpu0[i];
  r["cpu_s"] = cpu;
  // Everything else on the machine meanwhile (other builds, the kernel).
  r["machine_busy_s"] = busy1 - busy0;
  r["cores"] = sysconf(_SC_NPROCESSORS_ONLN);
  auto delta = [](const std::string& a, const std::string& b, const std::string& name,
                  const std::vector<std::string>& labels = {}) {
    return metric(b, name, labels) - metric(a, name, labels);
  };
  if (!ks1.empty()) {
    r["kube_scheduler"] = {
        {"attempts_scheduled",
         delta(ks0, ks1, "scheduler_schedule_attempts_total", {"result=\"scheduled\""})},
        {"attempts_unschedulable",
         delta(ks0, ks1, "scheduler_schedule_attempts_total", {"result=\"unschedulable\""})},
        {"attempts_error",
         delta(ks0, ks1, "scheduler_schedule_attempts_total", {"result=\"error\""})}};
  }
  if (!hs1.empty()) {
    json h = {
        {"filter_calls", delta(hs0, hs1, "hami_scheduler_requests_total", {"verb=\"filter\""})},
        {"bind_calls", delta(hs0, hs1, "hami_scheduler_requests_total", {"verb=\"bind\""})},
        {"bind_failures", delta(hs0, hs1, "hami_scheduler_failures_total", {"verb=\"bind\""})},
        {"bind_redirects", delta(hs0, hs1, "hami_scheduler_bind_redirects_total")},
        {"bind_deadline", delta(hs0, hs1, "hami_scheduler_failures_total",
                                {"verb=\"bind\"", "reason=\"BindDeadline\""}) +
                              delta(hs0, hs1, "hami_scheduler_failures_total",
                                    {"verb=\"bind\"", "reason=\"NoWorker\""})},
        {"already_bound", delta(hs0, hs1, "hami_scheduler_failures_total",
                                {"verb=\"bind\"", "reason=\"AlreadyBound\""})},
        {"bind_queue_wait_mean_ms",
         [&] {
           const double c =
               delta(hs0, hs1, "hami_scheduler_queue_wait_seconds_count", {"verb=\"bind\""});
           return c > 0 ? 1000 *
                              delta(hs0, hs1, "hami_scheduler_queue_wait_seconds_sum",
                                    {"verb=\"bind\""}) /
                              c
                        : 0.0;
         }()},
        {"webhook_calls", delta(hs0, hs1, "hami_scheduler_requests_total", {"verb=\"webhook\""})}};
    for (const char* verb : {"filter", "prioritize", "bind", "webhook"}) {
      const double cnt = delta(hs0, hs1, "hami_scheduler_request_duration_seconds_count",
                               {std::string("verb=\"") + verb + "\""});
      const double sum = delta(hs0, hs1, "hami_scheduler_request_duration_seconds_sum",
                               {std::string("verb=\"") + verb + "\""});
      h[std::string(verb) + "_mean_ms"] = cnt > 0 ? 1000 * sum / cnt : 0;
    }
    r["hami"] = h;
  }
  if (o.mode == "ours") {
    // The stand-in's last patches may still be in flight.
    const auto deadline = Clock::now() + 30s;
    json a;
    do {
      a = check_allocations(cl, o.ns);
      if (a["bind_phase_success"].get<int>() >= static_cast<int>(lat.size())) break;
      std::this_thread::sleep_for(500ms);
    } while (Clock::now() < deadline);
    r["allocations"] = a;
  } else {
    auto l = cl.list(hami::k8s::pod_path(o.ns));
    std::set<std::string> nodes;
    if (l)
      for (const json& p : l->items)
        if (!p["spec"].value("nodeName", "").empty()) nodes.insert(p["spec"]["nodeName"]);
    r["allocations"] = {{"nodes_used", nodes.size()}};
  }
  std::cout << r.dump() << std::endl;
  return lat.size() == static_cast<size_t>(n) ? 0 : 3;
}

int cmd_clean(const std::string& kubeconfig, const std::string& ns, int timeout_s) {
  auto cl = make_client(kubeconfig, 4);
  auto d = cl.del(hami::k8s::pod_path(ns) + "?gracePeriodSeconds=0");
  if (!d && !d.error().not_found()) die("delete pods of " + ns + ": " + d.error().message);
  const auto deadline = Clock::now() + std::chrono::seconds(timeout_s);
  for (;;) {
    auto l = cl.list(hami::k8s::pod_path(ns));
    if (l && l->items.empty()) break;
    if (Clock::now() > deadline)
      die("pods of " + ns + " still there after " + std::to_string(timeout_s) + " s");
    std::this_thread::sleep_for(500ms);
  }
  // A lock left behind (a stand-in that gave up) would stall the next run.
  int cleared = 0;
  if (auto nodes = cl.list(hami::k8s::node_path())) {
    for (const json& n : nodes->items) {
      const json an = n["metadata"].value("annotations", json::object());
      if (!an.contains(proto::kNodeLock)) continue;
      ++cleared;
      (void)cl.merge_patch(hami::k8s::node_path(n["metadata"]["name"].get<std::string>()),
                           {{"metadata", {{"annotations", {{proto::kNodeLock, nullptr}}}}}});
    }
  }
  if (cleared) std::cerr << "scheduler-e2e-bench: cleared " << cleared << " node locks left\n";
  return 0;
}

// --- report ----------------------------------------------------------------------

std::string fmt(double v, int prec = 1) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", prec, v);
  return b;
}

int cmd_report(const std::string& file) {
  std::ifstream in(file);
  if (!in) die("cannot read " + file);
  std::vector<json> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    json j = json::parse(line, nullptr, false);
    if (!j.is_discarded()) rows.push_back(std::move(j));
  }
  // Per label (nodes, pods, limits) the plain and ours runs.
  std::map<std::string, std::map<std::string, std::vector<json>>> by;
  std::vector<std::string> order;
  // Runs of ours with a variant (protocol, hold) get a row each, beside the
  // plain runs of their label.
  for (const json& r : rows) {
    std::string label = r.value("label", "");
    const std::string variant = r.value("variant", "");
    if (r.value("mode", "") == "ours" && !variant.empty()) label += ", " + variant;
    if (!by.count(label)) order.push_back(label);
    by[label][r.value("mode", "")].push_back(r);
  }
  for (auto& [label, m] : by) {
    for (const json& r : rows) {
      if (r.value("mode", "") == "plain" && label != r.value("label", "") &&
          label.rfind(r.value("label", "") + ", ", 0) == 0)
        m["plain"].push_back(r);
    }
  }
  std::erase_if(order, [&](const std::string& l) {
    return !by[l].count("ours") && std::any_of(order.begin(), order.end(), [&](const auto& o) {
      return o != l && o.rfind(l + ", ", 0) == 0;
    });
  });
  // The median of the rounds (the mean of the middle two for an even count).
  auto mean = [](const std::vector<json>& v, const char* k) {
    std::vector<double> x;
    for (const json& r : v)
      x.push_back(r.value(k, 0.0));
    if (x.empty()) return 0.0;
    std::sort(x.begin(), x.end());
    const size_t n = x.size();
    return n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
  };
  // What the same API traffic would allow with an extender that costs no
  // CPU at all: the machine's cores over the CPU per pod of everything else.
  auto perfect = [](const json& r) {
    const json cpu = r.value("cpu_s", json::object());
    double others = 0;
    for (const auto& [k, v] : cpu.items())
      if (k != "hami-scheduler") others += v.get<double>();
    const double cores = r.value("cores", static_cast<double>(sysconf(_SC_NPROCESSORS_ONLN)));
    const int bound = r.value("bound", 0);
    return others > 0 && bound > 0 ? cores / (others / bound) : 0.0;
  };
  std::printf(
      "| run | kube-scheduler alone, pods/s | ours, pods/s | ours / alone | ours: pod latency p50 "
      "/ p99 / max (s) | an extender of no CPU at all, at most |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (const auto& label : order) {
    const auto& m = by[label];
    const double plain = m.count("plain") ? mean(m.at("plain"), "pods_per_s") : 0;
    const double ours = m.count("ours") ? mean(m.at("ours"), "pods_per_s") : 0;
    std::string lat = "-", bound = "-";
    if (m.count("ours")) {
      lat = fmt(mean(m.at("ours"), "latency_p50_s")) + " / " +
            fmt(mean(m.at("ours"), "latency_p99_s")) + " / " +
            fmt(mean(m.at("ours"), "latency_max_s"));
      double b = 0;
      for (const json& r : m.at("ours"))
        b += perfect(r);
      b /= static_cast<double>(m.at("ours").size());
      bound = fmt(b, 0) + " pods/s" + (plain > 0 ? " (" + fmt(100 * b / plain, 0) + " %)" : "");
    }
    std::printf("| %s | %s | %s | %s %% | %s | %s |\n", label.c_str(), fmt(plain).c_str(),
                fmt(ours).c_str(), plain > 0 ? fmt(100 * ours / plain, 0).c_str() : "-",
                lat.c_str(), bound.c_str());
  }
  std::printf(
      "\nThe last column: the machine's cores over the CPU per pod of every process but "
      "hami-scheduler,\nthat is the webhook's, filter's and bind's API traffic and watch events "
      "as they are, handled by\nan extender that costs nothing.\n"
      "\nPer run: CPU seconds of each process while it ran, kube-scheduler's attempts, the "
      "extender's calls\n\n");
  for (const json& r : rows) {
    std::printf(
        "%s %s%s: %d/%d pods bound in %s s (%s pods/s; creating them took %s s), latency "
        "p50 %s p90 %s p99 %s max %s s\n",
        r.value("label", "").c_str(), r.value("mode", "").c_str(),
        r.value("variant", "").empty() ? "" : (", " + r.value("variant", "")).c_str(),
        r.value("bound", 0), r.value("pods", 0), fmt(r.value("span_s", 0.0)).c_str(),
        fmt(r.value("pods_per_s", 0.0)).c_str(), fmt(r.value("create_s", 0.0)).c_str(),
        fmt(r.value("latency_p50_s", 0.0)).c_str(), fmt(r.value("latency_p90_s", 0.0)).c_str(),
        fmt(r.value("latency_p99_s", 0.0)).c_str(), fmt(r.value("latency_max_s", 0.0)).c_str());
    std::string cpu;
    double total = 0;
    const json cpus = r.value("cpu_s", json::object());
    for (const auto& [k, v] : cpus.items()) {
      cpu += " " + k + " " + fmt(v.get<double>());
      total += v.get<double>();
    }
    const double per_pod_ms = r.value("bound", 0) > 0 ? 1000 * total / r.value("bound", 1) : 0;
    const double busy = r.value("machine_busy_s", 0.0);
    std::printf(
        "  cpu s:%s (total %s, %s ms per pod); the machine was busy %s of %s core-s, "
        "%s outside these processes\n",
        cpu.c_str(), fmt(total).c_str(), fmt(per_pod_ms).c_str(), fmt(busy).c_str(),
        fmt(r.value("span_s", 0.0) * static_cast<double>(sysconf(_SC_NPROCESSORS_ONLN))).c_str(),
        fmt(busy - total).c_str());
    if (r.contains("kube_scheduler")) {
      const json& k = r["kube_scheduler"];
      std::printf("  kube-scheduler attempts: scheduled %.0f, unschedulable %.0f, error %.0f\n",
                  k.value("attempts_scheduled", 0.0), k.value("attempts_unschedulable", 0.0),
                  k.value("attempts_error", 0.0));
    }
    if (r.contains("hami") && r.value("mode", "") == "ours") {
      const json& h = r["hami"];
      std::printf(
          "  extender: filter %.0f calls (%.2f ms mean), prioritize %.2f ms, bind %.0f calls "
          "(%.2f ms mean, %.2f ms of it waiting for a worker), %.0f failed (%.0f at the "
          "deadline, %.0f already bound), %.0f redirected; webhook %.0f calls (%.2f ms mean)\n",
          h.value("filter_calls", 0.0), h.value("filter_mean_ms", 0.0),
          h.value("prioritize_mean_ms", 0.0), h.value("bind_calls", 0.0),
          h.value("bind_mean_ms", 0.0), h.value("bind_queue_wait_mean_ms", 0.0),
          h.value("bind_failures", 0.0), h.value("bind_deadline", 0.0),
          h.value("already_bound", 0.0), h.value("bind_redirects", 0.0),
          h.value("webhook_calls", 0.0), h.value("webhook_mean_ms", 0.0));
    }
    if (r.contains("allocations"))
      std::printf("  placement: %s\n", r["allocations"].dump().c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // A write to a connection the server closed is an error to report, not a
  // reason to die.
  signal(SIGPIPE, SIG_IGN);
  CLI::App app{
      "scheduler-e2e-bench: the end-to-end scheduling benchmark's driver "
      "(bench/scheduler/e2e.sh)"};
  app.require_subcommand(1);
  std::string kubeconfig;
  int count = 0, threads = 8, workers = 8, timeout_s = 300;
  auto* nodes = app.add_subcommand("nodes", "Publish fake GPU nodes (8 H200 each)");
  nodes->add_option("--kubeconfig", kubeconfig)->required();
  nodes->add_option("--count", count)->required();
  nodes->add_option("--threads", threads)->capture_default_str();
  auto* standin = app.add_subcommand("standin", "The device plugin's requests after Allocate");
  standin->add_option("--kubeconfig", kubeconfig)->required();
  standin->add_option("--workers", workers)->capture_default_str();
  double hold_s = 0;
  std::string protocol = "lock";
  standin->add_option("--hold", hold_s, "Seconds from a pod seen bound to its patches")
      ->capture_default_str();
  standin->add_option("--protocol", protocol, "lock (upstream's) or match-pods")
      ->check(CLI::IsMember({"lock", "match-pods"}))
      ->capture_default_str();
  auto* mark = app.add_subcommand("protocol", "Mark the bench nodes lock or match-pods");
  mark->add_option("--kubeconfig", kubeconfig)->required();
  mark->add_option("protocol", protocol)->required()->check(CLI::IsMember({"lock", "match-pods"}));
  RunOptions ro;
  auto* run = app.add_subcommand("run", "Create pods at once, measure until all are bound");
  run->add_option("--kubeconfig", ro.kubeconfig)->required();
  run->add_option("--mode", ro.mode)->required()->check(CLI::IsMember({"plain", "ours"}));
  run->add_option("--pods", ro.pods)->required();
  run->add_option("--namespace", ro.ns)->required();
  run->add_option("--label", ro.label);
  run->add_option("--variant", ro.variant);
  run->add_option("--threads", ro.threads)->capture_default_str();
  run->add_option("--timeout", ro.timeout_s)->capture_default_str();
  run->add_option("--cpu", ro.cpu, "name=pidfile, one per process");
  run->add_option("--scheduler-metrics", ro.scheduler_metrics, "kube-scheduler's /metrics URL");
  run->add_option("--hami-metrics", ro.hami_metrics, "hami-scheduler's /metrics URL");
  std::string ns;
  auto* clean = app.add_subcommand("clean", "Delete a namespace's pods, clear node locks");
  clean->add_option("--kubeconfig", kubeconfig)->required();
  clean->add_option("--namespace", ns)->required();
  clean->add_option("--timeout", timeout_s)->capture_default_str();
  std::string file;
  auto* report = app.add_subcommand("report", "Tables from the runs' JSON lines");
  report->add_option("file", file)->required();
  CLI11_PARSE(app, argc, argv);
  if (*nodes) return cmd_nodes(kubeconfig, count, threads);
  if (*standin) return cmd_standin(kubeconfig, workers, hold_s, protocol);
  if (*mark) return cmd_protocol(kubeconfig, protocol, threads);
  if (*run) return cmd_run(ro);
  if (*clean) return cmd_clean(kubeconfig, ns, timeout_s);
  if (*report) return cmd_report(file);
  return 2;
}
