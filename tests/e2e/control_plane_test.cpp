// End to end on a real Kubernetes 1.20 control plane (tests/e2e/control-plane.sh:
// etcd, kube-apiserver with RBAC and our MutatingWebhookConfiguration,
// kube-scheduler with our extender). Everything goes through the real API:
// pods are created as users write them, mutated by our webhook, placed by
// kube-scheduler through our extender and bound by it; each node's
// hami-device-plugin (simulated NVML) registers its GPUs through the API, and
// a kubelet stand-in per node (the kubelet harness on the plugin's sockets)
// calls Allocate for every container of every pod bound to its node, as
// kubelet's device manager does.
//
// Runs only with the environment `control-plane.sh start` writes (sourced by
// tests/e2e/run.sh); skipped otherwise.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "k8s/client.hpp"
#include "k8s/config.hpp"
#include "k8s/paths.hpp"
#include "support/kubelet/fake_kubelet.hpp"
#include "support/subprocess.hpp"
#include "support/upstream_plugin/upstream_device_plugin.hpp"
#include "support/wait.hpp"

namespace hami::e2e {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

constexpr const char* kRes = "nvidia.com/gpu";
constexpr int kSplit = 10;  // the device plugin's default deviceSplitCount

std::string env_or(const char* name, const std::string& fallback = {}) {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

// A real API server behind each check: poll it gently.
bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  return test::wait_until(pred, timeout, 50ms);
}

std::string annotation(const json& obj, const std::string& key) {
  const json an = obj["metadata"].value("annotations", json::object());
  return an.contains(key) ? an[key].get<std::string>() : "<absent>";
}

// One GPU of the simulated inventory.
struct Gpu {
  std::string uuid;
  std::string model;
  int mib;
};

// One entry of hami.io/vgpu-devices-allocated: UUID,Type,MiB,Cores.
struct Grant {
  std::string uuid;
  int mib;
  int cores;
};

// Per container, init containers first (upstream's encoding).
std::vector<std::vector<Grant>> decode_devices(const std::string& text) {
  std::vector<std::vector<Grant>> out;
  std::stringstream containers(text);
  std::string c;
  while (std::getline(containers, c, ';')) {
    std::vector<Grant> gs;
    std::stringstream devices(c);
    std::string d;
    while (std::getline(devices, d, ':')) {
      if (d.empty()) continue;
      std::vector<std::string> f;
      std::stringstream fields(d);
      std::string x;
      while (std::getline(fields, x, ','))
        f.push_back(x);
      if (f.size() != 4) return {};
      try {
        gs.push_back({f[0], std::stoi(f[2]), std::stoi(f[3])});
      } catch (const std::exception&) {
        return {};
      }
    }
    out.push_back(gs);
  }
  return out;
}

// What the kubelet stand-in got from Allocate for one container.
struct ContainerAlloc {
  std::string container;
  std::vector<std::string> device_ids;
  std::map<std::string, std::string> env;
  std::map<std::string, std::pair<std::string, bool>> mounts;  // container path → host, ro
  std::string error;
};

struct PodAlloc {
  std::string uid;
  std::string node;
  std::vector<ContainerAlloc> containers;
};

int gpu_count(const json& container) {
  const json r = container.value("resources", json::object());
  for (const char* k : {"limits", "requests"}) {
    const json m = r.value(k, json::object());
    if (m.contains(kRes)) return std::stoi(m[kRes].get<std::string>());
  }
  return 0;
}

// Writes "<pid> <binary>" where control-plane.sh stop finds it, so a process
// a crashed test left behind is still stopped by PID.
class PidFile {
 public:
  PidFile(std::string path, pid_t pid, const std::string& exe) : path_(std::move(path)) {
    std::ofstream(path_) << pid << " " << exe << "\n";
  }
  ~PidFile() { std::filesystem::remove(path_); }
  PidFile(const PidFile&) = delete;
  PidFile& operator=(const PidFile&) = delete;

 private:
  std::string path_;
};

// A daemon with its output appended to a log file (a pipe nobody reads
// would block it once full).
struct Daemon {
  std::optional<test::Child> child;
  std::unique_ptr<PidFile> pid_file;

  void start(const std::string& name, const std::string& exe, std::vector<std::string> args,
             const test::Env& env, const std::string& dir) {
    std::vector<std::string> argv = {
        "/bin/sh", "-c", "exec \"$0\" \"$@\" >>" + dir + "/logs/" + name + ".log 2>&1", exe};
    argv.insert(argv.end(), args.begin(), args.end());
    child.emplace(test::Child::spawn(argv, env));
    pid_file = std::make_unique<PidFile>(dir + "/pids/" + name + ".pid", child->pid(), exe);
  }
  bool running() const { return child.has_value(); }
  int stop(int sig = SIGTERM) {
    if (!child) return 0;
    child->kill(sig);
    const int code = child->finish().exit_code;
    child.reset();
    pid_file.reset();
    return code;
  }
};

// kubelet's device-manager side for one node: every pod bound to the node is
// admitted once, and each of its containers asking for nvidia.com/gpu
// (init containers first) gets an Allocate call with IDs the plugin prefers
// among those not yet given to a live pod, as kubelet does.
class KubeletStandIn {
 public:
  KubeletStandIn(k8s::Client* client, std::string node, test::FakeKubelet* kubelet)
      : client_(client), node_(std::move(node)), kubelet_(kubelet) {
    thread_ = std::jthread([this](std::stop_token st) { run(st); });
  }
  ~KubeletStandIn() {
    thread_.request_stop();
    thread_.join();
  }

  std::optional<PodAlloc> find(const std::string& uid) const {
    std::lock_guard lk(mu_);
    auto it = admitted_.find(uid);
    if (it == admitted_.end()) return std::nullopt;
    return it->second;
  }

 private:
  void run(std::stop_token st) {
    while (!st.stop_requested()) {
      auto pods =
          client_->list(k8s::core_path("pods"), {.field_selector = "spec.nodeName=" + node_});
      if (pods) {
        std::set<std::string> live;
        for (const json& p : pods->items) {
          const std::string uid = p["metadata"]["uid"];
          live.insert(uid);
          bool seen;
          {
            std::lock_guard lk(mu_);
            seen = admitted_.count(uid) > 0;
          }
          if (!seen) admit(p);
        }
        std::lock_guard lk(mu_);
        for (auto it = in_use_.begin(); it != in_use_.end();) {
          it = live.count(it->first) ? std::next(it) : in_use_.erase(it);
        }
      }
      std::this_thread::sleep_for(50ms);
    }
  }

  void admit(const json& pod) {
    PodAlloc out;
    out.uid = pod["metadata"]["uid"];
    out.node = node_;
    std::vector<json> containers;
    for (const char* k : {"initContainers", "containers"})
      for (const json& c : pod["spec"].value(k, json::array()))
        containers.push_back(c);
    for (const json& c : containers) {
      const int n = gpu_count(c);
      if (n == 0) continue;
      ContainerAlloc ca;
      ca.container = c["name"];
      std::set<std::string> taken;
      {
        std::lock_guard lk(mu_);
        for (const auto& [uid, ids] : in_use_)
          taken.insert(ids.begin(), ids.end());
      }
      v1beta1::PreferredAllocationRequest preq;
      auto* req = preq.add_container_requests();
      const v1beta1::ListAndWatchResponse listed = kubelet_->devices(kRes);
      for (const auto& d : listed.devices())
        if (d.health() == "Healthy" && !taken.count(d.id())) req->add_available_deviceids(d.id());
      req->set_allocation_size(n);
      v1beta1::PreferredAllocationResponse presp;
      grpc::Status st = kubelet_->preferred(kRes, preq, &presp);
      if (st.ok() && presp.container_responses_size() == 1)
        for (const auto& id : presp.container_responses(0).deviceids())
          ca.device_ids.push_back(id);
      if (static_cast<int>(ca.device_ids.size()) != n) {
        ca.error = "kubelet: no " + std::to_string(n) + " devices available: " + st.error_message();
      } else {
        v1beta1::AllocateResponse resp;
        st = kubelet_->allocate(kRes, {ca.device_ids}, &resp);
        if (!st.ok()) {
          ca.error = st.error_message();
        } else if (resp.container_responses_size() == 1) {
          const auto& r = resp.container_responses(0);
          ca.env = {r.envs().begin(), r.envs().end()};
          for (const auto& m : r.mounts())
            ca.mounts[m.container_path()] = {m.host_path(), m.read_only()};
          std::lock_guard lk(mu_);
          auto& ids = in_use_[out.uid];
          ids.insert(ids.end(), ca.device_ids.begin(), ca.device_ids.end());
        }
      }
      out.containers.push_back(std::move(ca));
    }
    std::lock_guard lk(mu_);
    admitted_[out.uid] = std::move(out);
  }

  k8s::Client* client_;
  std::string node_;
  test::FakeKubelet* kubelet_;
  mutable std::mutex mu_;
  std::map<std::string, PodAlloc> admitted_;
  std::map<std::string, std::vector<std::string>> in_use_;
  std::jthread thread_;
};

struct NodeSpec {
  std::string name;
  std::vector<Gpu> gpus;
};

// node-a and node-b are alike, so binpack and spread have a choice to make;
// node-c has another model, for use-gputype.
std::vector<NodeSpec> inventory() {
  auto gpus = [](char node, const std::string& model, int mib) {
    std::vector<Gpu> g;
    for (int i = 1; i <= 2; ++i)
      g.push_back(
          {std::string("GPU-e2e0000") + node + "-0000-4000-8000-00000000000" + std::to_string(i),
           model, mib});
    return g;
  };
  return {{"node-a", gpus('a', "NVIDIA A100-SXM4-40GB", 40960)},
          {"node-b", gpus('b', "NVIDIA A100-SXM4-40GB", 40960)},
          {"node-c", gpus('c', "Tesla T4", 16384)}};
}

struct NodeRuntime {
  NodeSpec spec;
  std::string plugins, hook;
  std::unique_ptr<test::FakeKubelet> kubelet;
  Daemon plugin;
  std::unique_ptr<KubeletStandIn> standin;
};

struct Cluster {
  std::string dir, admin_kubeconfig, scheduler_kubeconfig, plugin_kubeconfig;
  std::string ca, cert, key;
  std::string client_ca;     // kube-scheduler's client certificates: --client-ca-file
  std::string decision_key;  // the scheduler signs, the plugins check: --decision-key-file
  int extender_port = 0, metrics_port = 0;
  std::optional<k8s::Client> client;
  std::vector<std::unique_ptr<NodeRuntime>> nodes;
  Daemon scheduler;
  std::string error;  // why the cluster could not be set up
};

Cluster* g_cluster = nullptr;

class ControlPlaneTest : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    if (env_or("HAMI_E2E_DIR").empty()) return;
    g_cluster = new Cluster();
    Cluster& c = *g_cluster;
    c.dir = env_or("HAMI_E2E_DIR");
    c.admin_kubeconfig = env_or("HAMI_E2E_KUBECONFIG");
    c.scheduler_kubeconfig = env_or("HAMI_E2E_SCHEDULER_KUBECONFIG");
    c.plugin_kubeconfig = env_or("HAMI_E2E_DEVICE_PLUGIN_KUBECONFIG");
    c.ca = env_or("HAMI_E2E_CA");
    c.cert = env_or("HAMI_E2E_CERT");
    c.key = env_or("HAMI_E2E_KEY");
    c.client_ca = env_or("HAMI_E2E_CLIENT_CA");
    c.decision_key = env_or("HAMI_E2E_DECISION_KEY", c.dir + "/decision.key");
    c.extender_port = std::stoi(env_or("HAMI_E2E_EXTENDER_PORT", "0"));
    c.metrics_port = std::stoi(env_or("HAMI_E2E_METRICS_PORT", "0"));
    c.error = set_up(c);
  }

  static void TearDownTestSuite() {
    if (!g_cluster) return;
    Cluster& c = *g_cluster;
    for (auto& n : c.nodes)
      n->standin.reset();
    if (int code = c.scheduler.stop(); code != 0)
      ADD_FAILURE() << "hami-scheduler exited with " << code << " on SIGTERM";
    for (auto& n : c.nodes)
      if (int code = n->plugin.stop(); code != 0)
        ADD_FAILURE() << "hami-device-plugin on " << n->spec.name << " exited with " << code;
    delete g_cluster;
    g_cluster = nullptr;
  }

 protected:
  void SetUp() override {
    if (!g_cluster) GTEST_SKIP() << "no control plane: run tests/e2e/run.sh";
    ASSERT_EQ(g_cluster->error, "");
    c_ = g_cluster;
    // One namespace per test; namespaces are never deleted (no namespace
    // controller runs to finish that), the control plane is thrown away.
    ns_ = "t";
    for (char ch : std::string(::testing::UnitTest::GetInstance()->current_test_info()->name())) {
      const auto u = static_cast<unsigned char>(ch);
      if (std::isupper(u)) ns_ += '-';
      ns_ += static_cast<char>(std::tolower(u));
    }
    ns_ = ns_.substr(0, 63);
    auto created = client().create(
        k8s::core_path("namespaces"),
        {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns_}}}});
    ASSERT_TRUE(created || created.error().already_exists()) << created.error().message;
  }

  void TearDown() override {
    if (!c_) return;
    // The next test starts on idle GPUs: every pod gone, and the
    // scheduler's cache (its metrics) back to nothing allocated.
    EXPECT_TRUE(delete_all_pods()) << "pods of " << ns_ << " not deleted";
    if (c_->scheduler.running()) {
      EXPECT_TRUE(wait_until([&] { return metric_sum("hami_gpu_shared_count") == 0; }, 30s))
          << "the scheduler still counts GPUs in use after every pod was deleted";
    }
  }

  static k8s::Client& client() { return *g_cluster->client; }

  static std::string set_up(Cluster& c) {
    auto cfg = k8s::Config::from_kubeconfig(c.admin_kubeconfig);
    if (!cfg) return "admin kubeconfig: " + cfg.error().message;
    auto cl = k8s::Client::from_config(*cfg);
    if (!cl) return "client: " + cl.error().message;
    c.client.emplace(std::move(*cl));
    for (const NodeSpec& spec : inventory()) {
      auto n = std::make_unique<NodeRuntime>();
      n->spec = spec;
      if (std::string e = publish_node(*c.client, spec); !e.empty()) return e;
      const std::string root = c.dir + "/nodes/" + spec.name;
      n->plugins = root + "/device-plugins";
      n->hook = root + "/hook";
      std::filesystem::create_directories(n->plugins);
      std::filesystem::create_directories(n->hook + "/vgpu");
      std::ofstream(n->hook + "/vgpu/libvgpu.so") << "not really a library";
      std::ofstream(root + "/nvml.script") << "";
      n->kubelet = std::make_unique<test::FakeKubelet>(n->plugins);
      std::string devices, names;
      for (const Gpu& g : spec.gpus) {
        devices += (devices.empty() ? "" : ",") + g.uuid + ":" + std::to_string(g.mib) + "m";
        names += (names.empty() ? "" : ",") + g.model;
      }
      n->plugin.start("hami-device-plugin-" + spec.name, DEVICE_PLUGIN_BINARY,
                      {"--node-name=" + spec.name, "--kubeconfig=" + c.plugin_kubeconfig,
                       "--device-plugin-path=" + n->plugins, "--hook-path=" + n->hook,
                       "--lock-dir=" + root + "/vgpulock", "--nvml-library=" + std::string(SIMNVML),
                       "--decision-key-file=" + c.decision_key, "--register-interval=5s", "-v4"},
                      {{"SIMGPU_STATE", root + "/gpu.state"},
                       {"SIMGPU_DEVICES", devices},
                       {"SIMGPU_NAMES", names},
                       {"SIMGPU_NUMA", "0,1"},
                       {"SIMGPU_NVML_SCRIPT", root + "/nvml.script"},
                       {"SIMGPU_FAIL", test::kUnset},
                       {"KUBECONFIG", test::kUnset}},
                      c.dir);
      if (!n->kubelet->wait_for_registrations(1, 20s))
        return "hami-device-plugin on " + spec.name + " never registered with kubelet";
      const int want = static_cast<int>(spec.gpus.size()) * kSplit;
      if (!n->kubelet->wait_for_devices(
              kRes, [&](const auto& l) { return l.devices_size() == want; }, 20s))
        return "hami-device-plugin on " + spec.name + " never listed its devices";
      if (!wait_until(
              [&] {
                auto node = c.client->get(k8s::node_path(spec.name));
                return node && annotation(*node, "hami.io/node-nvidia-register") != "<absent>";
              },
              20s))
        return "hami-device-plugin on " + spec.name + " never registered its GPUs on the node";
      n->standin = std::make_unique<KubeletStandIn>(&*c.client, spec.name, n->kubelet.get());
      c.nodes.push_back(std::move(n));
    }
    return start_scheduler(c);
  }

  // Node objects as kubelet publishes them: created, then the status
  // (capacity, allocatable, Ready) through the status subresource. The
  // TaintNodesByCondition admission plugin gives the node the not-ready
  // taint; the node lifecycle controller would lift it once Ready, but no
  // controller-manager runs, so it is lifted here.
  static std::string publish_node(k8s::Client& cl, const NodeSpec& spec) {
    const json node = {
        {"apiVersion", "v1"},
        {"kind", "Node"},
        {"metadata",
         {{"name", spec.name},
          {"labels", {{"kubernetes.io/hostname", spec.name}, {"kubernetes.io/os", "linux"}}}}}};
    auto made = cl.create(k8s::node_path(), node);
    if (!made && made.error().already_exists()) {
      // Left by an earlier run on this control plane (debugging by hand):
      // start from a node as fresh as a new kubelet's.
      if (auto d = cl.del(k8s::node_path(spec.name)); !d)
        return "delete node: " + d.error().message;
      made = cl.create(k8s::node_path(), node);
    }
    if (!made) return "create node: " + made.error().message;
    const std::string now = [] {
      char buf[32];
      const std::time_t t = std::time(nullptr);
      std::tm tm{};
      ::gmtime_r(&t, &tm);
      std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
      return std::string(buf);
    }();
    const json resources = {{"cpu", "64"},
                            {"memory", "256Gi"},
                            {"pods", "110"},
                            {kRes, std::to_string(spec.gpus.size() * kSplit)}};
    const json status = {{"status",
                          {{"capacity", resources},
                           {"allocatable", resources},
                           {"conditions",
                            {{{"type", "Ready"},
                              {"status", "True"},
                              {"reason", "KubeletReady"},
                              {"message", "kubelet is posting ready status"},
                              {"lastHeartbeatTime", now},
                              {"lastTransitionTime", now}}}}}}};
    if (auto r = cl.merge_patch(k8s::core_path("nodes", "", spec.name, "status"), status); !r)
      return "node status: " + r.error().message;
    if (auto r = cl.merge_patch(k8s::node_path(spec.name), {{"spec", {{"taints", nullptr}}}}); !r)
      return "node taints: " + r.error().message;
    auto got = cl.get(k8s::node_path(spec.name));
    if (!got) return got.error().message;
    if (!(*got)["spec"].value("taints", json::array()).empty())
      return "node " + spec.name + " still tainted: " + (*got)["spec"]["taints"].dump();
    if ((*got)["status"]["allocatable"].value("pods", "") != "110")
      return "node " + spec.name + " status not kept: " + (*got)["status"].dump();
    return "";
  }

  static std::string start_scheduler(Cluster& c) {
    c.scheduler.start("hami-scheduler", SCHEDULER_BINARY,
                      {"--kubeconfig=" + c.scheduler_kubeconfig,
                       "--http_bind=127.0.0.1:" + std::to_string(c.extender_port),
                       "--cert_file=" + c.cert, "--key_file=" + c.key,
                       // kube-scheduler 1.20 presents its certificate (tlsConfig
                       // certFile/keyFile): every pod below is bound through it.
                       "--client-ca-file=" + c.client_ca,
                       "--metrics-bind-address=127.0.0.1:" + std::to_string(c.metrics_port),
                       "--decision-key-file=" + c.decision_key,
                       // The users the test API server's tokens name.
                       "--decision-writers=hami-scheduler,hami-device-plugin", "-v4"},
                      {{"KUBECONFIG", test::kUnset}}, c.dir);
    httplib::SSLClient https("127.0.0.1", c.extender_port);
    https.set_ca_cert_path(c.ca.c_str());
    https.enable_server_certificate_verification(true);
    if (!wait_until(
            [&] {
              auto r = https.Get("/readyz");
              return r && r->status == 200;
            },
            30s))
      return "hami-scheduler never became ready (log: " + c.dir + "/logs/hami-scheduler.log)";
    // Ready means synced; every node's GPUs are in its cache.
    if (!wait_until([&] { return metric_sum("hami_scheduler_cached_nodes") == 3; }, 20s))
      return "hami-scheduler does not see the 3 nodes";
    return "";
  }

  // Sum of every sample of `name` on hami-scheduler's /metrics; -1 when unreadable.
  static double metric_sum(const std::string& name) {
    httplib::Client http("127.0.0.1", g_cluster->metrics_port);
    auto r = http.Get("/metrics");
    if (!r || r->status != 200) return -1;
    double sum = 0;
    std::stringstream in(r->body);
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind(name, 0) != 0) continue;
      const char next = line.size() > name.size() ? line[name.size()] : '\0';
      if (next != '{' && next != ' ') continue;
      sum += std::stod(line.substr(line.rfind(' ') + 1));
    }
    return sum;
  }

  // A pod as a user writes it: an image, resources, maybe annotations.
  static json container(const std::string& name, json limits = json::object()) {
    json c = {{"name", name}, {"image", "cuda:12"}, {"command", {"sleep", "infinity"}}};
    if (!limits.empty()) c["resources"] = {{"limits", limits}};
    return c;
  }
  json pod(const std::string& name, json containers, json annotations = json::object(),
           json init = json::array()) const {
    json p = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", name}, {"namespace", ns_}}},
              {"spec", {{"containers", containers}}}};
    if (!annotations.empty()) p["metadata"]["annotations"] = annotations;
    if (!init.empty()) p["spec"]["initContainers"] = init;
    return p;
  }

  json create(const json& p) {
    auto r = client().create(k8s::pod_path(ns_), p);
    EXPECT_TRUE(r) << r.error().message;
    return r ? *r : json();
  }

  std::optional<json> get_pod(const std::string& name) {
    auto r = client().get(k8s::pod_path(ns_, name));
    if (!r) return std::nullopt;
    return *r;
  }

  // Without a kubelet a bound pod would wait forever for its containers to
  // stop; grace period 0 deletes it at once, as `kubectl delete --force` does.
  void delete_pod(const std::string& name) {
    auto r = client().del(k8s::pod_path(ns_, name) + "?gracePeriodSeconds=0");
    EXPECT_TRUE(r || r.error().not_found()) << r.error().message;
  }

  // Deletes every pod of the test's namespace; true once none is left (30 s).
  bool delete_all_pods() {
    auto pods = client().list(k8s::pod_path(ns_));
    if (pods)
      for (const json& p : pods->items)
        delete_pod(p["metadata"]["name"]);
    return wait_until(
        [&] {
          auto l = client().list(k8s::pod_path(ns_));
          return l && l->items.empty();
        },
        30s);
  }

  // The pod once bound and admitted by its node's kubelet stand-in.
  struct Placed {
    json pod;
    PodAlloc alloc;
  };
  std::optional<Placed> wait_placed(const std::string& name,
                                    std::chrono::milliseconds timeout = 60s) {
    std::optional<Placed> out;
    std::string last = "never read";
    const bool ok = wait_until(
        [&] {
          auto p = get_pod(name);
          if (!p) return false;
          last = p->dump();
          const std::string node = (*p)["spec"].value("nodeName", "");
          if (node.empty()) return false;
          for (auto& n : c_->nodes) {
            if (n->spec.name != node) continue;
            auto a = n->standin->find((*p)["metadata"]["uid"]);
            if (!a) return false;
            out = Placed{*p, *a};
            return true;
          }
          return false;
        },
        timeout);
    EXPECT_TRUE(ok) << "pod " << ns_ << "/" << name << " not placed and admitted; last seen "
                    << last;
    return ok ? out : std::nullopt;
  }

  const NodeSpec& node_spec(const std::string& name) const {
    for (auto& n : c_->nodes)
      if (n->spec.name == name) return n->spec;
    throw std::runtime_error("no node " + name);
  }
  int gpu_mib(const std::string& uuid) const {
    for (auto& n : c_->nodes)
      for (const Gpu& g : n->spec.gpus)
        if (g.uuid == uuid) return g.mib;
    return -1;
  }

  // The contract of docs/device-plugin.md §Allocate for one container and
  // the GPUs the scheduler granted it.
  void expect_container_env(const std::string& uid, const ContainerAlloc& a,
                            const std::vector<Grant>& granted, const std::string& hook) {
    SCOPED_TRACE("container " + a.container);
    ASSERT_EQ(a.error, "");
    std::vector<std::string> uuids;
    for (const Grant& g : granted)
      uuids.push_back(g.uuid);
    std::vector<std::string> sorted = uuids;
    std::sort(sorted.begin(), sorted.end());  // NVML order = UUID order in this inventory
    std::string visible;
    for (const auto& u : sorted)
      visible += (visible.empty() ? "" : ",") + u;
    EXPECT_EQ(a.env.at("NVIDIA_VISIBLE_DEVICES"), visible);
    for (size_t i = 0; i < sorted.size(); ++i) {
      const auto g = std::find_if(granted.begin(), granted.end(),
                                  [&](const Grant& x) { return x.uuid == sorted[i]; });
      EXPECT_EQ(a.env.at("CUDA_DEVICE_MEMORY_LIMIT_" + std::to_string(i)),
                std::to_string(g->mib) + "m");
    }
    const auto first = std::find_if(granted.begin(), granted.end(),
                                    [&](const Grant& x) { return x.uuid == sorted[0]; });
    EXPECT_EQ(a.env.at("CUDA_DEVICE_SM_LIMIT"), std::to_string(std::min(first->cores, 100)));
    EXPECT_THAT(a.env.at("CUDA_DEVICE_MEMORY_SHARED_CACHE"),
                ::testing::MatchesRegex(hook + "/vgpu/[0-9a-f-]{36}\\.cache"));
    const std::string v = hook + "/vgpu";
    const std::string key = uid + "_" + a.container;
    EXPECT_EQ(a.mounts.at(v + "/libvgpu.so"), std::make_pair(v + "/libvgpu.so", true));
    EXPECT_EQ(a.mounts.at(v), std::make_pair(v + "/containers/" + key, false));
    EXPECT_EQ(a.mounts.at("/etc/ld.so.preload"), std::make_pair(v + "/ld.so.preload", true));
    EXPECT_EQ(a.mounts.at("/etc/vgpu/limits.d"), std::make_pair(v + "/limits/" + key, true));
    EXPECT_EQ(a.mounts.at("/etc/vgpu/control"), std::make_pair(v + "/control/" + key, true));
    EXPECT_EQ(a.mounts.count("/tmp/vgpulock"), 1u);
    // kubelet's IDs are on the GPUs the scheduler chose.
    for (const auto& id : a.device_ids)
      EXPECT_TRUE(std::any_of(uuids.begin(), uuids.end(), [&](const std::string& u) {
        return id.rfind(u + "-", 0) == 0;
      })) << id;
  }

  // Checks the whole protocol for a placed pod: annotations, bind-phase,
  // every GPU container allocated as granted. Returns the grants.
  std::vector<std::vector<Grant>> expect_protocol(const Placed& p) {
    const std::string node = p.pod["spec"]["nodeName"];
    const std::string uid = p.pod["metadata"]["uid"];
    EXPECT_EQ(annotation(p.pod, "hami.io/vgpu-node"), node);
    const auto grants = decode_devices(annotation(p.pod, "hami.io/vgpu-devices-allocated"));
    // bind-phase reaches success once the last container is allocated.
    const std::string name = p.pod["metadata"]["name"];
    std::optional<json> now;
    EXPECT_TRUE(wait_until(
        [&] {
          now = get_pod(name);
          return now && annotation(*now, "hami.io/bind-phase") == "success";
        },
        10s))
        << "bind-phase of " << name << " never success";
    // Every device served exactly once: the plugin consumed them all.
    if (now) {
      const std::string left = annotation(*now, "hami.io/vgpu-devices-to-allocate");
      for (const auto& c : decode_devices(left))
        EXPECT_TRUE(c.empty()) << name << " still has devices to allocate: " << left;
    }
    std::vector<std::string> names;
    for (const char* k : {"initContainers", "containers"})
      for (const json& c : p.pod["spec"].value(k, json::array()))
        names.push_back(c["name"]);
    EXPECT_EQ(grants.size(), names.size()) << annotation(p.pod, "hami.io/vgpu-devices-allocated");
    std::string hook;
    for (auto& n : c_->nodes)
      if (n->spec.name == node) hook = n->hook;
    size_t next = 0;
    for (size_t i = 0; i < names.size() && i < grants.size(); ++i) {
      if (grants[i].empty()) continue;
      for (const Grant& g : grants[i])
        EXPECT_GT(gpu_mib(g.uuid), 0) << g.uuid << " is not a GPU of " << node;
      if (next >= p.alloc.containers.size()) {
        ADD_FAILURE() << "container " << names[i] << " was never allocated";
        continue;
      }
      const ContainerAlloc& a = p.alloc.containers[next++];
      EXPECT_EQ(a.container, names[i]);
      expect_container_env(uid, a, grants[i], hook);
    }
    EXPECT_EQ(next, p.alloc.containers.size());
    return grants;
  }

  // The Events of reason `reason` about pod `p` (by UID: a rerun in the
  // same namespace finds the events of the pods of the same name before it).
  std::vector<json> events_of(const json& p, const std::string& reason) {
    std::vector<json> out;
    auto evs = client().list(
        k8s::core_path("events", ns_),
        {.field_selector = "involvedObject.uid=" + p["metadata"]["uid"].get<std::string>()});
    if (!evs) return out;
    for (const json& e : evs->items)
      if (e.value("reason", "") == reason) out.push_back(e);
    return out;
  }

  // node-upstream, a node running upstream HAMi's device plugin (the
  // double of tests/support/upstream_plugin), for one test: the node as
  // kubelet publishes it, upstream's registration, our scheduler's cache
  // at four nodes. stop_upstream_node() undoes all of it, so the other
  // tests see only the fixture's three nodes.
  struct UpstreamNode {
    std::optional<k8s::Client> client;  // as user hami-device-plugin, as upstream's runs
    std::unique_ptr<test::UpstreamDevicePlugin> plugin;
    bool published = false;
  };
  static constexpr const char* kUpstreamNode = "node-upstream";
  static std::vector<test::UpstreamGpu> upstream_gpus() {
    return {{"GPU-e2e000ff-0000-4000-8000-000000000001", "Tesla V100-PCIE-32GB", 32768, 0, 0},
            {"GPU-e2e000ff-0000-4000-8000-000000000002", "Tesla V100-PCIE-32GB", 32768, 1, 1}};
  }
  std::string start_upstream_node(UpstreamNode& u, test::UpstreamOptions options) {
    NodeSpec spec{kUpstreamNode, {}};
    for (const test::UpstreamGpu& g : upstream_gpus())
      spec.gpus.push_back({g.uuid, g.nvml_name, g.mib});
    if (std::string e = publish_node(client(), spec); !e.empty()) return e;
    u.published = true;
    auto cfg = k8s::Config::from_kubeconfig(c_->plugin_kubeconfig);
    if (!cfg) return "device plugin kubeconfig: " + cfg.error().message;
    auto cl = k8s::Client::from_config(*cfg);
    if (!cl) return "client: " + cl.error().message;
    u.client.emplace(std::move(*cl));
    u.plugin = std::make_unique<test::UpstreamDevicePlugin>(&*u.client, kUpstreamNode,
                                                            upstream_gpus(), options);
    if (std::string e = u.plugin->start(); !e.empty()) return e;
    if (!wait_until([&] { return metric_sum("hami_scheduler_cached_nodes") == 4; }, 30s))
      return "hami-scheduler does not count node-upstream's GPUs (cached nodes: " +
             std::to_string(metric_sum("hami_scheduler_cached_nodes")) + ")";
    return "";
  }
  void stop_upstream_node(UpstreamNode& u) {
    EXPECT_TRUE(delete_all_pods()) << "pods of " << ns_ << " not deleted";
    u.plugin.reset();
    if (!u.published) return;
    auto d = client().del(k8s::node_path(kUpstreamNode));
    EXPECT_TRUE(d || d.error().not_found()) << d.error().message;
    EXPECT_TRUE(wait_until([&] { return metric_sum("hami_scheduler_cached_nodes") == 3; }, 30s))
        << "hami-scheduler still counts node-upstream";
  }
  json pinned(json p) const {
    p["spec"]["nodeSelector"] = {{"kubernetes.io/hostname", kUpstreamNode}};
    return p;
  }
  // Waits until upstream's Allocate has run for the pod and, when it
  // succeeded, the pod's bind-phase says so; returns the pod as it is then.
  std::optional<std::pair<json, test::UpstreamAllocation>> upstream_served(
      const UpstreamNode& u, const std::string& name) {
    std::optional<std::pair<json, test::UpstreamAllocation>> out;
    std::string last = "never read";
    const bool ok = wait_until(
        [&] {
          auto a = u.plugin->allocation(ns_, name);
          auto p = get_pod(name);
          if (p) last = p->dump();
          if (!a || !p) return false;
          if (a->error.empty() && annotation(*p, "hami.io/bind-phase") != "success") return false;
          out.emplace(*p, *a);
          return true;
        },
        60s);
    EXPECT_TRUE(ok) << "upstream's plugin never allocated " << ns_ << "/" << name << "; last seen "
                    << last;
    return ok ? out : std::nullopt;
  }
  // What both sides agree on for a pod served on node-upstream: bound
  // there, our annotations as upstream's plugin reads them, every device it
  // took one that it registered, bind-phase success, our BindingSucceed
  // Event and upstream's hami.io/vgpu-node label.
  void expect_upstream_protocol(const json& pod, const test::UpstreamAllocation& a) {
    const std::string name = pod["metadata"]["name"];
    SCOPED_TRACE("pod " + name);
    EXPECT_EQ(a.error, "");
    EXPECT_EQ(a.phase, "success");
    EXPECT_EQ(pod["spec"].value("nodeName", ""), kUpstreamNode);
    EXPECT_EQ(annotation(pod, "hami.io/vgpu-node"), kUpstreamNode);
    EXPECT_THAT(annotation(pod, "hami.io/bind-time"), ::testing::MatchesRegex("[0-9]+"));
    EXPECT_EQ(annotation(pod, "hami.io/bind-phase"), "success");
    // What the plugin decoded from to-allocate is what we recorded as allocated.
    const auto grants = decode_devices(annotation(pod, "hami.io/vgpu-devices-allocated"));
    ASSERT_FALSE(grants.empty()) << annotation(pod, "hami.io/vgpu-devices-allocated");
    ASSERT_GE(a.slots.size(), grants.size()) << a.to_allocate;
    for (size_t i = 0; i < grants.size(); ++i) {
      ASSERT_EQ(a.slots[i].size(), grants[i].size()) << "slot " << i << ": " << a.to_allocate;
      for (size_t j = 0; j < grants[i].size(); ++j) {
        EXPECT_EQ(a.slots[i][j].uuid, grants[i][j].uuid);
        EXPECT_EQ(a.slots[i][j].mem_mib, grants[i][j].mib);
        EXPECT_EQ(a.slots[i][j].cores, grants[i][j].cores);
        // The vendor's common word, which PodAllocationTrySuccess looks for.
        EXPECT_EQ(a.slots[i][j].type, "NVIDIA");
      }
    }
    // Consumed: every slot emptied, none dropped.
    EXPECT_EQ(annotation(pod, "hami.io/vgpu-devices-to-allocate"),
              std::string(a.slots.size(), ';'));
    for (const auto& [container, devices] : a.served)
      for (const test::UpstreamDevice& d : devices)
        EXPECT_TRUE(d.uuid == upstream_gpus()[0].uuid || d.uuid == upstream_gpus()[1].uuid)
            << container << ": " << d.uuid;
    std::vector<json> ev;
    EXPECT_TRUE(wait_until([&] { return !(ev = events_of(pod, "BindingSucceed")).empty(); }, 30s));
    if (!ev.empty()) {
      EXPECT_EQ(ev[0]["message"],
                "Successfully binding node [node-upstream] to " + ns_ + "/" + name);
    }
    std::string label;
    EXPECT_TRUE(wait_until(
        [&] {
          auto p = get_pod(name);
          label =
              p ? (*p)["metadata"].value("labels", json::object()).value("hami.io/vgpu-node", "")
                : "";
          return label == kUpstreamNode;
        },
        30s))
        << label;
  }

  Cluster* c_ = nullptr;
  std::string ns_;
};

// Runs `f` when the scope ends, ASSERTs included.
struct OnExit {
  std::function<void()> f;
  ~OnExit() { f(); }
};

TEST_F(ControlPlaneTest, MemoryAndCoresSliceIsMutatedPlacedAndAllocated) {
  const json created = create(pod("slice", {container("main", {{"nvidia.com/gpumem", "3000"},
                                                               {"nvidia.com/gpucores", "30"}})}));
  // The webhook: ours to schedule, one GPU since none was asked, and the
  // runtime's default seccomp profile.
  EXPECT_EQ(created["spec"]["schedulerName"], "hami-scheduler");
  EXPECT_EQ(created["spec"]["containers"][0]["resources"]["limits"][kRes], "1");
  EXPECT_EQ(created["spec"]["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
  auto p = wait_placed("slice");
  ASSERT_TRUE(p);
  const auto grants = expect_protocol(*p);
  ASSERT_EQ(grants.size(), 1u);
  ASSERT_EQ(grants[0].size(), 1u);
  EXPECT_EQ(grants[0][0].mib, 3000);
  EXPECT_EQ(grants[0][0].cores, 30);
  EXPECT_EQ(p->alloc.containers.at(0).env.at("CUDA_DEVICE_MEMORY_LIMIT_0"), "3000m");
  EXPECT_EQ(p->alloc.containers.at(0).env.at("CUDA_DEVICE_SM_LIMIT"), "30");
  // The node lock is released once Allocate is done.
  auto node = client().get(k8s::node_path(p->pod["spec"]["nodeName"].get<std::string>()));
  ASSERT_TRUE(node);
  EXPECT_EQ(annotation(*node, "hami.io/mutex.lock"), "<absent>");
}

TEST_F(ControlPlaneTest, TwoGpusWithMemoryPercentage) {
  create(pod("two", {container("main", {{kRes, "2"}, {"nvidia.com/gpumem-percentage", "50"}})}));
  auto p = wait_placed("two");
  ASSERT_TRUE(p);
  const auto grants = expect_protocol(*p);
  ASSERT_EQ(grants.size(), 1u);
  ASSERT_EQ(grants[0].size(), 2u);
  EXPECT_NE(grants[0][0].uuid, grants[0][1].uuid) << "two slices of one GPU";
  for (const Grant& g : grants[0])
    EXPECT_EQ(g.mib, gpu_mib(g.uuid) / 2) << g.uuid;
  EXPECT_EQ(p->alloc.containers.at(0).env.count("CUDA_DEVICE_MEMORY_LIMIT_1"), 1u);
}

TEST_F(ControlPlaneTest, InitContainerAndTwoContainers) {
  create(pod("multi",
             {container("app", {{"nvidia.com/gpumem", "2000"}, {"nvidia.com/gpucores", "20"}}),
              container("sidecar", {{"nvidia.com/gpumem", "1000"}, {"nvidia.com/gpucores", "10"}}),
              container("no-gpu")},
             {},
             {container("init", {{"nvidia.com/gpumem", "1500"}, {"nvidia.com/gpucores", "50"}})}));
  auto p = wait_placed("multi");
  ASSERT_TRUE(p);
  const auto grants = expect_protocol(*p);
  ASSERT_EQ(grants.size(), 4u);
  EXPECT_EQ(grants[0].at(0).mib, 1500);
  EXPECT_EQ(grants[1].at(0).mib, 2000);
  EXPECT_EQ(grants[2].at(0).mib, 1000);
  EXPECT_TRUE(grants[3].empty());
  ASSERT_EQ(p->alloc.containers.size(), 3u);
  EXPECT_EQ(p->alloc.containers[0].container, "init");
  EXPECT_EQ(p->alloc.containers[1].container, "app");
  EXPECT_EQ(p->alloc.containers[2].container, "sidecar");
}

TEST_F(ControlPlaneTest, UseGpuTypePicksTheModel) {
  create(pod("t4", {container("main", {{"nvidia.com/gpumem", "4000"}})},
             {{"nvidia.com/use-gputype", "T4"}}));
  create(pod("a100", {container("main", {{"nvidia.com/gpumem", "4000"}})},
             {{"nvidia.com/use-gputype", "A100"}}));
  auto t4 = wait_placed("t4");
  auto a100 = wait_placed("a100");
  ASSERT_TRUE(t4 && a100);
  EXPECT_EQ(t4->pod["spec"]["nodeName"], "node-c");
  EXPECT_NE(a100->pod["spec"]["nodeName"], "node-c");
  expect_protocol(*t4);
  expect_protocol(*a100);
}

TEST_F(ControlPlaneTest, WholeGpuFromCountAlone) {
  const json created = create(pod("whole", {container("main", {{kRes, "1"}})}));
  // A count alone is a whole, exclusive GPU (upstream PR #1354).
  EXPECT_EQ(created["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpucores"], "100");
  auto p = wait_placed("whole");
  ASSERT_TRUE(p);
  const auto grants = expect_protocol(*p);
  ASSERT_EQ(grants.at(0).size(), 1u);
  EXPECT_EQ(grants[0][0].mib, gpu_mib(grants[0][0].uuid));
  EXPECT_EQ(grants[0][0].cores, 100);
  EXPECT_EQ(p->alloc.containers.at(0).env.at("CUDA_DEVICE_SM_LIMIT"), "100");
}

TEST_F(ControlPlaneTest, PodWithoutGpuIsLeftToTheDefaultScheduler) {
  const json created = create(pod("plain", {container("main", {{"cpu", "100m"}})}));
  EXPECT_EQ(created["spec"].value("schedulerName", ""), "default-scheduler");
  auto p = wait_placed("plain");
  ASSERT_TRUE(p);
  EXPECT_EQ(annotation(p->pod, "hami.io/vgpu-node"), "<absent>");
  EXPECT_TRUE(p->alloc.containers.empty()) << "Allocate called for a pod without GPUs";
}

TEST_F(ControlPlaneTest, InvalidPodIsRefusedWithOurMessage) {
  auto r = client().create(
      k8s::pod_path(ns_),
      pod("bad", {container("main", {{kRes, "1"}, {"nvidia.com/gpumem-percentage", "150"}})}));
  ASSERT_FALSE(r) << "created: " << r->dump();
  EXPECT_THAT(r.error().message,
              HasSubstr("admission webhook \"vgpu.hami.io\" denied the request"));
  EXPECT_THAT(r.error().message,
              HasSubstr("container main: nvidia.com/gpumem-percentage is 150, must be 0..100"));
  EXPECT_FALSE(get_pod("bad")) << "the refused pod exists";
}

// Issue 36 through a real API server: nobody but our scheduler and device
// plugin writes the decision annotations, on create (the mutating webhook)
// or on update (the ValidatingWebhookConfiguration, which no pod label
// escapes); the pod the scheduler placed is signed and served.
TEST_F(ControlPlaneTest, DecisionAnnotationsAreOursAlone) {
  const json forged = {{"hami.io/vgpu-node", "node-a"},
                       {"hami.io/vgpu-devices-allocated", "GPU-x,NVIDIA,16000,100:;"},
                       {"hami.io/bind-phase", "allocating"}};
  auto r = client().create(k8s::pod_path(ns_), pod("forged", {container("main")}, forged));
  ASSERT_FALSE(r) << "created: " << r->dump();
  EXPECT_THAT(r.error().message, HasSubstr("admission webhook \"vgpu.hami.io\" denied the request: "
                                           "pod carries hami.io/vgpu-node"));
  create(pod("placed", {container("main", {{kRes, "1"}, {"nvidia.com/gpumem", "1000"}})}));
  auto p = wait_placed("placed");
  ASSERT_TRUE(p);
  EXPECT_EQ(annotation(p->pod, "hami.io/decision-signature").rfind("v1:", 0), 0u);
  EXPECT_EQ(annotation(p->pod, "hami.io/bind-phase"), "success");
  const std::string path = k8s::pod_path(ns_, "placed");
  auto raised = client().merge_patch(
      path, {{"metadata", {{"annotations", {{"hami.io/vgpu-devices-allocated", "x"}}}}}});
  ASSERT_FALSE(raised) << "the owner changed the decision";
  EXPECT_THAT(raised.error().message,
              HasSubstr("admission webhook \"decisions.hami.io\" denied the request: user admin "
                        "may not set, change or remove hami.io/vgpu-devices-allocated"));
  auto dropped = client().merge_patch(
      path, {{"metadata",
              {{"labels", {{"hami.io/webhook", "ignore"}}},
               {"annotations", {{"hami.io/vgpu-devices-allocated", nullptr}}}}}});
  EXPECT_FALSE(dropped) << "a label exempted the pod from the guard";
  auto labelled = client().merge_patch(path, {{"metadata", {{"labels", {{"team", "a"}}}}}});
  EXPECT_TRUE(labelled) << labelled.error().message;
}

// Issue 24 points 3, 4 and 6: a namespace's ResourceQuota on gpumem refuses
// at the webhook a pod alone over it and keeps in filter one that would pass
// it beside the namespace's pods (kube-scheduler's FailedScheduling names
// the quota); our Events and the hami.io/vgpu-node label arrive through the
// real API server (its validation and RBAC).
TEST_F(ControlPlaneTest, QuotaRefusalsEventsAndPodLabel) {
  auto rq = client().create(k8s::core_path("resourcequotas", ns_),
                            {{"apiVersion", "v1"},
                             {"kind", "ResourceQuota"},
                             {"metadata", {{"name", "gpu"}, {"namespace", ns_}}},
                             {"spec", {{"hard", {{"limits.nvidia.com/gpumem", "8000"}}}}}});
  ASSERT_TRUE(rq) << rq.error().message;
  // The scheduler sees the quota through its watch: dry runs until the
  // webhook refuses, then the real create is refused too.
  const json huge = pod("huge", {container("main", {{"nvidia.com/gpumem", "9000"}})});
  EXPECT_TRUE(
      wait_until([&] { return !client().create(k8s::pod_path(ns_) + "?dryRun=All", huge); }, 30s));
  auto refused = client().create(k8s::pod_path(ns_), huge);
  ASSERT_FALSE(refused) << "created: " << refused->dump();
  EXPECT_THAT(refused.error().message,
              HasSubstr("exceeding resource quota: ResourceQuotaNotFit: namespace " + ns_ +
                        " ResourceQuota gpu limits nvidia.com/gpumem to 8000; 0 used + 9000 "
                        "requested"));

  create(pod("first", {container("main", {{"nvidia.com/gpumem", "6000"}})}));
  auto first = wait_placed("first");
  ASSERT_TRUE(first);
  const json second = create(pod("second", {container("main", {{"nvidia.com/gpumem", "6000"}})}));

  std::vector<json> ev;
  ASSERT_TRUE(
      wait_until([&] { return !(ev = events_of(first->pod, "BindingSucceed")).empty(); }, 30s));
  EXPECT_EQ(ev[0]["source"]["component"], "hami-scheduler");
  EXPECT_EQ(ev[0]["message"], "Successfully binding node [" +
                                  first->pod["spec"]["nodeName"].get<std::string>() + "] to " +
                                  ns_ + "/first");
  std::string label;
  EXPECT_TRUE(wait_until(
      [&] {
        auto p = get_pod("first");
        label = p ? (*p)["metadata"].value("labels", json::object()).value("hami.io/vgpu-node", "")
                  : "";
        return label == first->pod["spec"]["nodeName"];
      },
      30s))
      << label;

  // The second pod would take the namespace to 12000 of 8000.
  const std::string reason = "ResourceQuotaNotFit: namespace " + ns_ +
                             " ResourceQuota gpu limits nvidia.com/gpumem to 8000; 6000 used + "
                             "6000 requested";
  ASSERT_TRUE(
      wait_until([&] { return !(ev = events_of(second, "FilteringFailed")).empty(); }, 30s));
  EXPECT_EQ(ev[0]["type"], "Warning");
  EXPECT_THAT(ev[0]["message"].get<std::string>(), HasSubstr(reason));
  ASSERT_TRUE(
      wait_until([&] { return !(ev = events_of(second, "FailedScheduling")).empty(); }, 30s));
  EXPECT_THAT(ev[0]["message"].get<std::string>(), HasSubstr(reason));

  // The first pod gone, the second fits the quota.
  delete_pod("first");
  auto placed = wait_placed("second", 90s);
  ASSERT_TRUE(placed);
  expect_protocol(*placed);
}

// Issue 37 point 2, live resize: a running pod asks with nvidia.com/vgpu-resize
// (as `kubectl annotate` writes it). What does not fit its GPU is refused with
// a ResizeRefused Event and changes nothing; what fits rewrites the
// allocation, signed again, and the device plugin replaces the container's
// limits file on the node.
TEST_F(ControlPlaneTest, LiveResizeIsAppliedOrRefusedWithAnEvent) {
  create(pod("grow",
             {container("main", {{"nvidia.com/gpumem", "4000"}, {"nvidia.com/gpucores", "30"}})},
             {{"nvidia.com/use-gputype", "T4"}}));
  auto placed = wait_placed("grow");
  ASSERT_TRUE(placed);
  expect_protocol(*placed);
  const std::string uid = placed->pod["metadata"]["uid"];
  std::string hook;
  for (auto& n : c_->nodes)
    if (n->spec.name == placed->pod["spec"]["nodeName"]) hook = n->hook;
  const std::string limits = hook + "/vgpu/limits/" + uid + "_main/limits";
  auto file = [&] {
    std::ifstream f(limits);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  };
  EXPECT_THAT(file(), HasSubstr("CUDA_DEVICE_MEMORY_LIMIT_0=4000m\n"));
  auto current = [&](const char* key) {
    auto p = get_pod("grow");
    return p ? annotation(*p, key) : std::string();
  };
  const std::string allocated = current("hami.io/vgpu-devices-allocated");
  const std::string signature = current("hami.io/decision-signature");
  auto ask = [&](const std::string& request) {
    auto r = client().patch_annotations(k8s::pod_path(ns_, "grow"),
                                        {{"nvidia.com/vgpu-resize", request}});
    ASSERT_TRUE(r) << r.error().message;
  };

  // A T4 has 16 GiB: refused, with an Event, nothing changed.
  ask("gpumem=20000");
  std::vector<json> ev;
  ASSERT_TRUE(
      wait_until([&] { return !(ev = events_of(placed->pod, "ResizeRefused")).empty(); }, 30s));
  EXPECT_EQ(ev[0]["type"], "Warning");
  EXPECT_EQ(ev[0]["source"]["component"], "hami-scheduler");
  EXPECT_THAT(ev[0]["message"].get<std::string>(), HasSubstr("ResizeRefused: does not fit GPU-"));
  EXPECT_EQ(current("hami.io/vgpu-resize-handled"), "gpumem=20000");
  EXPECT_EQ(current("hami.io/vgpu-devices-allocated"), allocated);
  EXPECT_EQ(current("hami.io/decision-signature"), signature);
  EXPECT_THAT(file(), HasSubstr("CUDA_DEVICE_MEMORY_LIMIT_0=4000m\n"));

  // Fits: the allocation rewritten and signed again, the limits file follows.
  ask("gpumem=8000,gpucores=60");
  ASSERT_TRUE(wait_until(
      [&] { return current("hami.io/vgpu-resize-handled") == "gpumem=8000,gpucores=60"; }, 30s));
  const std::string resized = current("hami.io/vgpu-devices-allocated");
  EXPECT_THAT(resized, HasSubstr(",8000,60:"));
  EXPECT_EQ(resized.substr(0, resized.find(',')), allocated.substr(0, allocated.find(',')));
  EXPECT_NE(current("hami.io/decision-signature"), signature);
  EXPECT_TRUE(wait_until(
      [&] {
        const std::string f = file();
        return f.find("CUDA_DEVICE_MEMORY_LIMIT_0=8000m\n") != std::string::npos &&
               f.find("CUDA_DEVICE_SM_LIMIT=60\n") != std::string::npos;
      },
      30s))
      << file();
  ASSERT_TRUE(wait_until([&] { return !(ev = events_of(placed->pod, "Resized")).empty(); }, 30s));
  EXPECT_THAT(ev[0]["message"].get<std::string>(), HasSubstr("4000->8000 MiB, 30->60 %"));
  // The scheduler counts the new size once.
  EXPECT_TRUE(wait_until(
      [&] { return metric_sum("hami_vgpu_memory_allocated_bytes") == 8000.0 * (1 << 20); }, 10s))
      << metric_sum("hami_vgpu_memory_allocated_bytes");
}

// Issue 24 point 6, a mixed install: node-upstream runs upstream HAMi's
// NVIDIA device plugin (v2.10; tests/support/upstream_plugin makes its API
// requests with its annotation values byte for byte), the other nodes ours.
// Our scheduler reads upstream's registration, places and binds the node's
// pods, and upstream's Allocate consumes what our scheduler wrote and
// releases the node lock; a pod too big for the node waits with our reason.
TEST_F(ControlPlaneTest, UpstreamDevicePluginNodeIsServed) {
  UpstreamNode up;
  OnExit cleanup{[&] { stop_upstream_node(up); }};
  ASSERT_EQ(start_upstream_node(up, {}), "");
  auto node = client().get(k8s::node_path(kUpstreamNode));
  ASSERT_TRUE(node);
  // Upstream v2.10's MarshalNodeDevices output for these GPUs, and no
  // handshake: upstream's plugin writes none, our scheduler asks for none.
  EXPECT_EQ(annotation(*node, "hami.io/node-nvidia-register"),
            R"([{"id":"GPU-e2e000ff-0000-4000-8000-000000000001","count":10,"devmem":32768,)"
            R"("devcore":100,"type":"NVIDIA-Tesla V100-PCIE-32GB","mode":"hami-core",)"
            R"("health":true},{"id":"GPU-e2e000ff-0000-4000-8000-000000000002","index":1,)"
            R"("count":10,"devmem":32768,"devcore":100,"type":"NVIDIA-Tesla V100-PCIE-32GB",)"
            R"("numa":1,"mode":"hami-core","health":true}])");
  EXPECT_EQ(annotation(*node, "hami.io/node-handshake"), "<absent>");

  create(pinned(pod("one", {container("main", {{kRes, "1"},
                                               {"nvidia.com/gpumem", "3000"},
                                               {"nvidia.com/gpucores", "30"}})})));
  create(pinned(pod("two", {container("main", {{kRes, "2"},
                                               {"nvidia.com/gpumem", "4000"},
                                               {"nvidia.com/gpucores", "20"}})})));
  create(
      pinned(pod("multi",
                 {container("app", {{"nvidia.com/gpumem", "2000"}, {"nvidia.com/gpucores", "10"}}),
                  container("no-gpu")},
                 {}, {container("init")})));
  // No V100 here has 40,000 MiB (node-a's A100s would, but the pod is pinned).
  const json big =
      create(pinned(pod("big", {container("main", {{"nvidia.com/gpumem", "40000"}})})));

  auto one = upstream_served(up, "one");
  ASSERT_TRUE(one);
  expect_upstream_protocol(one->first, one->second);
  ASSERT_EQ(one->second.served.size(), 1u);
  EXPECT_EQ(one->second.served[0].first, "main");
  ASSERT_EQ(one->second.served[0].second.size(), 1u);
  EXPECT_EQ(one->second.served[0].second[0].mem_mib, 3000);
  EXPECT_EQ(one->second.served[0].second[0].cores, 30);

  auto two = upstream_served(up, "two");
  ASSERT_TRUE(two);
  expect_upstream_protocol(two->first, two->second);
  ASSERT_EQ(two->second.served.size(), 1u);
  const auto& pair = two->second.served[0].second;
  ASSERT_EQ(pair.size(), 2u);
  EXPECT_NE(pair[0].uuid, pair[1].uuid) << "two slices of one GPU";
  for (const test::UpstreamDevice& d : pair) {
    EXPECT_EQ(d.mem_mib, 4000);
    EXPECT_EQ(d.cores, 20);
  }

  auto multi = upstream_served(up, "multi");
  ASSERT_TRUE(multi);
  expect_upstream_protocol(multi->first, multi->second);
  // Slots: init, app, no-gpu, and the piece after the last ';'.
  EXPECT_EQ(multi->second.slots.size(), 4u) << multi->second.to_allocate;
  ASSERT_EQ(multi->second.served.size(), 1u);
  EXPECT_EQ(multi->second.served[0].first, "app");
  ASSERT_EQ(multi->second.served[0].second.size(), 1u);
  EXPECT_EQ(multi->second.served[0].second[0].mem_mib, 2000);
  EXPECT_EQ(multi->second.served[0].second[0].cores, 10);

  // Every lock released by upstream's plugin, and our cache charges the
  // node's GPUs with what upstream's plugin allocated.
  std::string held;
  EXPECT_TRUE(wait_until(
      [&] {
        auto n = client().get(k8s::node_path(kUpstreamNode));
        held = n ? annotation(*n, "hami.io/mutex.lock") : "<no node>";
        return held == "<absent>";
      },
      10s))
      << "node-upstream still locked: " << held;
  EXPECT_TRUE(wait_until([&] { return metric_sum("hami_gpu_shared_count") == 4; }, 20s))
      << metric_sum("hami_gpu_shared_count");

  std::vector<json> ev;
  ASSERT_TRUE(wait_until([&] { return !(ev = events_of(big, "FilteringFailed")).empty(); }, 30s));
  EXPECT_EQ(ev[0]["type"], "Warning");
  EXPECT_THAT(ev[0]["message"].get<std::string>(), HasSubstr("2/2 CardInsufficientMemory"));
  EXPECT_THAT(ev[0]["message"].get<std::string>(), HasSubstr(kUpstreamNode));
  ASSERT_TRUE(wait_until([&] { return !(ev = events_of(big, "FailedScheduling")).empty(); }, 30s));
  EXPECT_THAT(ev[0]["message"].get<std::string>(), HasSubstr("CardInsufficientMemory"));
  auto b = get_pod("big");
  ASSERT_TRUE(b);
  EXPECT_EQ((*b)["spec"].value("nodeName", ""), "") << "a pod too big for node-upstream was placed";
  EXPECT_FALSE(up.plugin->allocation(ns_, "big"));
}

// Releases before v2.10 also wrote "devicepairscore":{} into each device
// of the registration (a struct Go's omitempty never omits).
TEST_F(ControlPlaneTest, UpstreamPre210RegistrationIsRead) {
  UpstreamNode up;
  OnExit cleanup{[&] { stop_upstream_node(up); }};
  ASSERT_EQ(start_upstream_node(up, {.pair_score_field = true}), "");
  auto node = client().get(k8s::node_path(kUpstreamNode));
  ASSERT_TRUE(node);
  EXPECT_THAT(annotation(*node, "hami.io/node-nvidia-register"),
              HasSubstr(R"("mode":"hami-core","health":true,"devicepairscore":{}})"));
  create(pinned(pod("one", {container("main", {{"nvidia.com/gpumem", "30000"},
                                               {"nvidia.com/gpucores", "50"}})})));
  auto one = upstream_served(up, "one");
  ASSERT_TRUE(one);
  expect_upstream_protocol(one->first, one->second);
  ASSERT_EQ(one->second.served.size(), 1u);
  ASSERT_EQ(one->second.served[0].second.size(), 1u);
  EXPECT_EQ(one->second.served[0].second[0].mem_mib, 30000);
}

// A batch of pods that only the two A100 nodes take; `policy` for both the
// node and the GPU choice. Returns pods per node and per GPU.
struct Placement {
  std::map<std::string, int> per_node;
  std::map<std::string, int> per_gpu;
};

TEST_F(ControlPlaneTest, BinpackFillsOneNodeAndOneGpu) {
  const json annotations = {{"nvidia.com/use-gputype", "A100"},
                            {"hami.io/node-scheduler-policy", "binpack"},
                            {"hami.io/gpu-scheduler-policy", "binpack"}};
  for (int i = 0; i < 4; ++i)
    create(pod("bp-" + std::to_string(i),
               {container("main", {{"nvidia.com/gpumem", "8000"}, {"nvidia.com/gpucores", "20"}})},
               annotations));
  Placement pl;
  for (int i = 0; i < 4; ++i) {
    auto p = wait_placed("bp-" + std::to_string(i));
    ASSERT_TRUE(p);
    const auto grants = expect_protocol(*p);
    ++pl.per_node[p->pod["spec"]["nodeName"]];
    ++pl.per_gpu[grants.at(0).at(0).uuid];
  }
  EXPECT_EQ(pl.per_node.size(), 1u) << "binpack used more than one node";
  EXPECT_EQ(pl.per_gpu.size(), 1u) << "binpack used more than one GPU";
}

TEST_F(ControlPlaneTest, SpreadUsesEveryNodeAndGpu) {
  const json annotations = {{"nvidia.com/use-gputype", "A100"},
                            {"hami.io/node-scheduler-policy", "spread"},
                            {"hami.io/gpu-scheduler-policy", "spread"}};
  for (int i = 0; i < 4; ++i)
    create(pod("sp-" + std::to_string(i),
               {container("main", {{"nvidia.com/gpumem", "8000"}, {"nvidia.com/gpucores", "20"}})},
               annotations));
  Placement pl;
  for (int i = 0; i < 4; ++i) {
    auto p = wait_placed("sp-" + std::to_string(i));
    ASSERT_TRUE(p);
    const auto grants = expect_protocol(*p);
    ++pl.per_node[p->pod["spec"]["nodeName"]];
    ++pl.per_gpu[grants.at(0).at(0).uuid];
  }
  EXPECT_EQ(pl.per_node, (std::map<std::string, int>{{"node-a", 2}, {"node-b", 2}}));
  EXPECT_EQ(pl.per_gpu.size(), 4u) << "spread put two pods on one GPU while others were idle";
}

TEST_F(ControlPlaneTest, UnfitPodWaitsWithOurReasonUntilSpaceIsFreed) {
  // No GPU anywhere has 100,000 MiB.
  const json huge_pod = create(pod("huge", {container("main", {{"nvidia.com/gpumem", "100000"}})}));
  // Both T4s taken whole; a T4 slice must wait for them.
  create(pod("hog", {container("main", {{kRes, "2"}})}, {{"nvidia.com/use-gputype", "T4"}}));
  auto hog = wait_placed("hog");
  ASSERT_TRUE(hog);
  EXPECT_EQ(hog->pod["spec"]["nodeName"], "node-c");
  const json waiter_pod = create(pod("waiter", {container("main", {{"nvidia.com/gpumem", "1000"}})},
                                     {{"nvidia.com/use-gputype", "T4"}}));

  // kube-scheduler records our filter's reasons in the FailedScheduling
  // event and in the pod's PodScheduled condition.
  // (By UID: a rerun in the same namespace finds the events of the pods
  // of the same name before it.)
  auto event_for = [&](const json& p) {
    std::string msg;
    wait_until(
        [&] {
          auto evs = client().list(
              k8s::core_path("events", ns_),
              {.field_selector = "involvedObject.uid=" + p["metadata"]["uid"].get<std::string>()});
          if (!evs) return false;
          for (const json& e : evs->items)
            if (e.value("reason", "") == "FailedScheduling") msg = e.value("message", "");
          return !msg.empty();
        },
        30s);
    return msg;
  };
  const std::string huge = event_for(huge_pod);
  EXPECT_THAT(huge, HasSubstr("0/3 nodes are available"));
  EXPECT_THAT(huge, HasSubstr("2/2 CardInsufficientMemory"));
  const std::string waiter = event_for(waiter_pod);
  EXPECT_THAT(waiter, HasSubstr("0/3 nodes are available"));
  EXPECT_THAT(waiter, HasSubstr("2/2 CardTypeMismatch"));
  // The hog holds all of both T4s' memory.
  EXPECT_THAT(waiter, HasSubstr("2/2 CardInsufficientMemory"));
  std::optional<json> w;
  std::string message;
  EXPECT_TRUE(wait_until(
      [&] {
        w = get_pod("waiter");
        if (!w) return false;
        for (const json& cond : (*w)["status"].value("conditions", json::array()))
          if (cond["type"] == "PodScheduled" && cond["status"] == "False" &&
              cond.value("reason", "") == "Unschedulable") {
            message = cond.value("message", "");
            return true;
          }
        return false;
      },
      30s))
      << (w ? (*w)["status"].dump() : "no pod");
  EXPECT_THAT(message, HasSubstr("CardTypeMismatch"));
  ASSERT_TRUE(w);
  EXPECT_EQ((*w)["spec"].value("nodeName", ""), "");

  // Deleting the hog frees both T4s; kube-scheduler retries the waiter.
  delete_pod("hog");
  auto placed = wait_placed("waiter", 90s);
  ASSERT_TRUE(placed);
  EXPECT_EQ(placed->pod["spec"]["nodeName"], "node-c");
  expect_protocol(*placed);
  auto h = get_pod("huge");
  ASSERT_TRUE(h);
  EXPECT_EQ((*h)["spec"].value("nodeName", ""), "") << "a pod that fits nowhere was placed";
}

TEST_F(ControlPlaneTest, ExtenderRestartedMidBatchLosesNoPodAndGrantsNoGpuTwice) {
  constexpr int kPods = 12;
  for (int i = 0; i < kPods; ++i)
    create(pod("r-" + std::to_string(i), {container("main", {{"nvidia.com/gpumem", "3000"},
                                                             {"nvidia.com/gpucores", "15"}})}));
  // Once a few are bound, hami-scheduler dies without a word and comes back.
  ASSERT_TRUE(wait_until(
      [&] {
        auto l = client().list(k8s::pod_path(ns_));
        if (!l) return false;
        int bound = 0;
        for (const json& p : l->items)
          bound += !p["spec"].value("nodeName", "").empty();
        return bound >= 2;
      },
      60s));
  c_->scheduler.stop(SIGKILL);
  const std::string err = start_scheduler(*c_);
  ASSERT_EQ(err, "");

  std::map<std::string, int> slots, mib, cores;
  for (int i = 0; i < kPods; ++i) {
    auto p = wait_placed("r-" + std::to_string(i), 180s);
    ASSERT_TRUE(p) << "pod r-" << i << " lost";
    const auto grants = expect_protocol(*p);
    for (const auto& c : grants)
      for (const Grant& g : c) {
        ++slots[g.uuid];
        mib[g.uuid] += g.mib;
        cores[g.uuid] += g.cores;
      }
  }
  for (const auto& [uuid, n] : slots) {
    EXPECT_LE(n, kSplit) << uuid;
    EXPECT_LE(mib[uuid], gpu_mib(uuid)) << uuid << " over-committed";
    EXPECT_LE(cores[uuid], 100) << uuid << " over-committed";
  }
  // No node stays locked by a bind the kill cut short.
  for (auto& n : c_->nodes) {
    std::string held;
    EXPECT_TRUE(wait_until(
        [&] {
          auto node = client().get(k8s::node_path(n->spec.name));
          held = node ? annotation(*node, "hami.io/mutex.lock") : "<no node>";
          return held == "<absent>";
        },
        10s))
        << n->spec.name << " still locked: " << held;
  }
  // The restarted scheduler's cache, rebuilt from the API, agrees.
  EXPECT_TRUE(wait_until([&] { return metric_sum("hami_gpu_shared_count") == kPods; }, 20s))
      << metric_sum("hami_gpu_shared_count");
}

// Issue 27, sharing modes: node-mps, for this test only, runs our device
// plugin with a config that puts its second GPU in mps mode. A pod annotated
// nvidia.com/vgpu-mode: mps lands on that GPU and Allocate makes it an MPS
// client; a plain pod goes to the time-sliced GPU and, when only the MPS GPU
// has room, waits with CardTypeMismatch instead of landing there.
TEST_F(ControlPlaneTest, MpsPodGoesOnlyToTheMpsGpuAndIsAnMpsClient) {
  Cluster& c = *c_;
  NodeSpec spec{"node-mps",
                {{"GPU-e2e000ee-0000-4000-8000-000000000001", "NVIDIA L4", 23034},
                 {"GPU-e2e000ee-0000-4000-8000-000000000002", "NVIDIA L4", 23034}}};
  const std::string ts_uuid = spec.gpus[0].uuid;
  const std::string mps_uuid = spec.gpus[1].uuid;
  const std::string root = c.dir + "/nodes/" + spec.name;
  NodeRuntime* n = nullptr;
  bool published = false;
  OnExit undo{[&] {
    EXPECT_TRUE(delete_all_pods()) << "pods of " << ns_ << " not deleted";
    for (auto it = c.nodes.begin(); it != c.nodes.end(); ++it) {
      if (it->get() != n) continue;
      (*it)->standin.reset();
      EXPECT_EQ((*it)->plugin.stop(), 0) << "hami-device-plugin on node-mps";
      c.nodes.erase(it);
      break;
    }
    if (!published) return;
    auto d = client().del(k8s::node_path(spec.name));
    EXPECT_TRUE(d || d.error().not_found()) << d.error().message;
    EXPECT_TRUE(wait_until([&] { return metric_sum("hami_scheduler_cached_nodes") == 3; }, 30s))
        << "hami-scheduler still counts node-mps";
  }};

  ASSERT_EQ(publish_node(client(), spec), "");
  published = true;
  auto rt = std::make_unique<NodeRuntime>();
  rt->spec = spec;
  rt->plugins = root + "/device-plugins";
  rt->hook = root + "/hook";
  std::filesystem::create_directories(rt->plugins);
  std::filesystem::create_directories(rt->hook + "/vgpu");
  std::ofstream(rt->hook + "/vgpu/libvgpu.so") << "not really a library";
  // The plugin starts the MPS GPU's control daemon (the simulated one, first
  // in its PATH), which makes the pipe directory Allocate mounts.
  const std::string pipe = rt->hook + "/vgpu/mps/" + mps_uuid + "/pipe";
  const char* path = std::getenv("PATH");
  std::ofstream(root + "/nvml.script") << "";
  std::ofstream(root + "/config.yaml")
      << "nodeconfig:\n- name: node-mps\n  devicemodes:\n  - index: 1\n    operatingmode: mps\n";
  rt->kubelet = std::make_unique<test::FakeKubelet>(rt->plugins);
  rt->plugin.start("hami-device-plugin-node-mps", DEVICE_PLUGIN_BINARY,
                   {"--node-name=node-mps", "--kubeconfig=" + c.plugin_kubeconfig,
                    "--device-plugin-path=" + rt->plugins, "--hook-path=" + rt->hook,
                    "--lock-dir=" + root + "/vgpulock", "--nvml-library=" + std::string(SIMNVML),
                    "--config-file=" + root + "/config.yaml",
                    "--decision-key-file=" + c.decision_key, "--register-interval=5s", "-v4"},
                   {{"SIMGPU_STATE", root + "/gpu.state"},
                    {"SIMGPU_DEVICES", ts_uuid + ":23034m," + mps_uuid + ":23034m"},
                    {"SIMGPU_NAMES", "NVIDIA L4,NVIDIA L4"},
                    {"SIMGPU_NUMA", "0,0"},
                    {"SIMGPU_NVML_SCRIPT", root + "/nvml.script"},
                    {"SIMGPU_FAIL", test::kUnset},
                    {"PATH", std::string(SIMMPS_BIN_DIR) + ":" + (path ? path : "/usr/bin:/bin")},
                    {"KUBECONFIG", test::kUnset}},
                   c.dir);
  ASSERT_TRUE(rt->kubelet->wait_for_registrations(1, 20s)) << "never registered with kubelet";
  ASSERT_TRUE(rt->kubelet->wait_for_devices(
      kRes, [&](const auto& l) { return l.devices_size() == 2 * kSplit; }, 20s))
      << "never listed its devices";
  rt->standin = std::make_unique<KubeletStandIn>(&*c.client, spec.name, rt->kubelet.get());
  n = rt.get();
  c.nodes.push_back(std::move(rt));

  // Registered with each GPU's own mode, and counted by the scheduler. The
  // MPS GPU registers unhealthy until its daemon answers: wait for healthy,
  // or a pod created in between waits out kube-scheduler's 60-s retry.
  json reg;
  ASSERT_TRUE(wait_until(
      [&] {
        auto node = client().get(k8s::node_path(spec.name));
        if (!node) return false;
        const std::string a = annotation(*node, "hami.io/node-nvidia-register");
        if (a == "<absent>") return false;
        reg = json::parse(a, nullptr, false);
        if (!reg.is_array() || reg.size() != 2) return false;
        for (const json& d : reg)
          if (!d.value("health", false)) return false;
        return true;
      },
      20s))
      << reg.dump();
  std::map<std::string, std::string> modes;
  for (const json& d : reg)
    modes[d.value("id", "")] = d.value("mode", "");
  EXPECT_EQ(modes[ts_uuid], "hami-core");
  EXPECT_EQ(modes[mps_uuid], "mps");
  ASSERT_TRUE(wait_until([&] { return metric_sum("hami_scheduler_cached_nodes") == 4; }, 30s));

  auto on_node = [](json p) {
    p["spec"]["nodeSelector"] = {{"kubernetes.io/hostname", "node-mps"}};
    return p;
  };
  const json mps = {{"nvidia.com/vgpu-mode", "mps"}};

  // The MPS pod: on the MPS GPU, an MPS client with its share and memory.
  create(on_node(pod(
      "serve", {container("main", {{"nvidia.com/gpumem", "4000"}, {"nvidia.com/gpucores", "30"}})},
      mps)));
  auto serve = wait_placed("serve");
  ASSERT_TRUE(serve);
  EXPECT_EQ(serve->pod["spec"]["nodeName"], "node-mps");
  const auto grants = decode_devices(annotation(serve->pod, "hami.io/vgpu-devices-allocated"));
  ASSERT_EQ(grants.size(), 1u);
  ASSERT_EQ(grants[0].size(), 1u);
  EXPECT_EQ(grants[0][0].uuid, mps_uuid);
  ASSERT_EQ(serve->alloc.containers.size(), 1u);
  const ContainerAlloc& a = serve->alloc.containers[0];
  ASSERT_EQ(a.error, "");
  EXPECT_EQ(a.env.at("NVIDIA_VISIBLE_DEVICES"), mps_uuid);
  EXPECT_EQ(a.env.at("CUDA_MPS_PIPE_DIRECTORY"), "/tmp/nvidia-mps");
  EXPECT_EQ(a.env.at("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "30");
  EXPECT_EQ(a.env.at("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), "0=4000M");
  EXPECT_EQ(a.env.at("CUDA_DEVICE_MEMORY_LIMIT_0"), "4000m");  // the library's limit stays
  EXPECT_EQ(a.env.count("CUDA_DEVICE_SM_LIMIT"), 0u);          // MPS divides the SMs
  EXPECT_EQ(a.mounts.at("/tmp/nvidia-mps"), std::make_pair(pipe, false));
  EXPECT_EQ(a.mounts.count(n->hook + "/vgpu/libvgpu.so"), 1u);
  EXPECT_TRUE(wait_until(
      [&] {
        auto p = get_pod("serve");
        return p && annotation(*p, "hami.io/bind-phase") == "success";
      },
      10s));

  // A plain pod: on the time-sliced GPU, paced by the library as before.
  create(on_node(pod("train", {container("main", {{"nvidia.com/gpumem", "8000"},
                                                  {"nvidia.com/gpucores", "60"}})})));
  auto train = wait_placed("train");
  ASSERT_TRUE(train);
  const auto tg = expect_protocol(*train);
  ASSERT_EQ(tg.size(), 1u);
  ASSERT_EQ(tg[0].size(), 1u);
  EXPECT_EQ(tg[0][0].uuid, ts_uuid);
  EXPECT_EQ(train->alloc.containers.at(0).env.count("CUDA_MPS_PIPE_DIRECTORY"), 0u);

  // 16000 MiB fits only the MPS GPU now (19034 free there, 15034 on the
  // other): a plain pod waits, an MPS pod of the same size is placed.
  const json more =
      create(on_node(pod("more", {container("main", {{"nvidia.com/gpumem", "16000"}})})));
  // The last FailedScheduling message of a pod, once there is one.
  auto scheduling_failure = [&](const json& p) {
    std::string why;
    EXPECT_TRUE(wait_until(
        [&] {
          for (const json& e : events_of(p, "FailedScheduling"))
            why = e.value("message", "");
          return !why.empty();
        },
        30s));
    return why;
  };
  const std::string why = scheduling_failure(more);
  EXPECT_THAT(why, HasSubstr("1/2 CardTypeMismatch"));
  EXPECT_THAT(why, HasSubstr("1/2 CardInsufficientMemory"));
  create(on_node(pod("serve2", {container("main", {{"nvidia.com/gpumem", "16000"}})}, mps)));
  auto serve2 = wait_placed("serve2");
  ASSERT_TRUE(serve2);
  const auto g2 = decode_devices(annotation(serve2->pod, "hami.io/vgpu-devices-allocated"));
  ASSERT_EQ(g2.size(), 1u);
  ASSERT_EQ(g2[0].size(), 1u);
  EXPECT_EQ(g2[0][0].uuid, mps_uuid);
  auto m = get_pod("more");
  ASSERT_TRUE(m);
  EXPECT_EQ((*m)["spec"].value("nodeName", ""), "") << "a plain pod was placed beside MPS clients";

  // The MPS pods so far declare no user; one that runs as 1000 would wait for
  // their server to exit: it is kept off the MPS GPU with the reason.
  json other =
      on_node(pod("other-user", {container("main", {{"nvidia.com/gpumem", "1000"}})}, mps));
  other["spec"]["securityContext"] = {{"runAsUser", 1000}};
  EXPECT_THAT(scheduling_failure(create(other)), HasSubstr("1/2 MpsUserMismatch"));
  auto o = get_pod("other-user");
  ASSERT_TRUE(o);
  EXPECT_EQ((*o)["spec"].value("nodeName", ""), "") << "placed beside another user's MPS clients";
}

}  // namespace
}  // namespace hami::e2e
