// Upstream HAMi v2.10's Helm chart runs our binaries (issue 24, point 1).
//
// The chart (test input, never copied into the repository) is rendered with
// real Helm (`helm template`, the pinned v4.1.4 that scripts/setup-helm.sh
// installs, found at configure time). So the arguments and environment below
// are what the chart's
// templates produce for the default values and for values that switch on
// each branch around our containers' command lines, not a hand-written copy.
// Each container of ours (the scheduler extender, the device plugin, the
// monitor) is then run under upstream's binary name (a link, as the images
// ship it) with exactly that command line and environment, plus:
//   --check-flags            parse and validate everything, exit without a cluster;
//   --node-config-file=F     the device plugin only: stands in for the chart's
//                            /config mount of its hami-device-plugin ConfigMap;
// and with the chart's mounted files (/device-config.yaml, /tls/tls.*) as
// files in a temporary directory holding what the chart puts there (the
// rendered ConfigMaps; a certificate from a test CA for the Secret).
//
// Where is the chart: $HAMI_UPSTREAM_CHART, else ../shared/reference/
// upstream-hami-chart-2.10 beside the repository, else /work/shared/...;
// absent: every test is SKIPPED with that message.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "support/apiserver/certs.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"

namespace hami::test {
namespace {

namespace fs = std::filesystem;

std::string chart_dir() {
  if (const char* p = std::getenv("HAMI_UPSTREAM_CHART"); p && *p) return p;
  const std::string beside =
      std::string(HAMI_SOURCE_DIR) + "/../shared/reference/upstream-hami-chart-2.10";
  if (fs::exists(beside + "/Chart.yaml")) return beside;
  return "/work/shared/reference/upstream-hami-chart-2.10";
}

struct Container {
  std::vector<std::string> command;  // command + args, as the kubelet runs them
  Env env;
  std::string post_start;  // the postStart exec's last argument, if any
};

struct Render {
  std::map<std::string, Container> containers;  // by container name
  std::map<std::string, std::string> files;     // ConfigMap name/key -> data
};

// n[path[0]][path[1]]..., or an undefined node where one is missing (yaml-cpp
// throws on indexing into a missing key).
YAML::Node at(const YAML::Node& node, std::initializer_list<const char*> path) {
  YAML::Node n;
  n.reset(node);  // rebinds; `n = x` would overwrite the node n refers to
  for (const char* key : path) {
    const YAML::Node& cur = n;  // const: a missing key is not inserted
    if (!cur || !cur.IsMap() || !cur[key]) return YAML::Node(YAML::NodeType::Undefined);
    n.reset(cur[key]);
  }
  return n;
}

std::vector<std::string> strings(const YAML::Node& list) {
  std::vector<std::string> out;
  if (list && list.IsSequence()) {
    for (const auto& s : list)
      out.push_back(s.as<std::string>());
  }
  return out;
}

// The fieldRef values a kubelet would fill in.
std::string field_ref(const std::string& path) {
  if (path == "spec.nodeName") return "your-node-name";  // the name in the chart's config.json
  if (path == "metadata.name") return "hami-scheduler-7d9c-x";
  if (path == "metadata.namespace") return "hami-system";
  return "unknown";
}

// Renders the chart with `sets` (helm --set syntax) into containers and files.
Render render(const std::vector<std::string>& sets) {
  std::vector<std::string> argv{HELM,          "template",       "--namespace",
                                "hami-system", "--kube-version", "v1.30.0"};
  for (const auto& s : sets) {
    argv.push_back("--set");
    argv.push_back(s);
  }
  argv.push_back("hami");
  argv.push_back(chart_dir());
  const ProcessResult r = run_process(argv);
  Render out;
  EXPECT_EQ(r.exit_code, 0) << "helm template: " << r.err;
  for (const YAML::Node& doc : YAML::LoadAll(r.out)) {
    if (!doc || !doc.IsMap()) continue;
    const std::string kind = doc["kind"].as<std::string>("");
    if (kind == "ConfigMap" && doc["data"]) {
      for (const auto& kv : doc["data"]) {
        out.files[doc["metadata"]["name"].as<std::string>() + "/" + kv.first.as<std::string>()] =
            kv.second.as<std::string>();
      }
    }
    if (kind != "Deployment" && kind != "DaemonSet") continue;
    for (const auto& c : at(doc, {"spec", "template", "spec", "containers"})) {
      Container k;
      k.command = strings(c["command"]);
      for (const auto& a : strings(c["args"]))
        k.command.push_back(a);
      for (const auto& e : at(c, {"env"})) {
        const std::string v =
            e["valueFrom"]
                ? field_ref(at(e, {"valueFrom", "fieldRef", "fieldPath"}).as<std::string>(""))
                : at(e, {"value"}).as<std::string>("");
        k.env.emplace_back(e["name"].as<std::string>(), v);
      }
      if (const auto ps = at(c, {"lifecycle", "postStart", "exec", "command"}); ps) {
        k.post_start = strings(ps).back();
      }
      out.containers[c["name"].as<std::string>()] = k;
    }
  }
  return out;
}

class UpstreamChart : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string(HELM).empty()) {
      GTEST_SKIP() << "no helm at configure time (neither in ~/.cache/hami-tools/helm-v4.1.4 nor "
                      "on PATH) to render upstream's chart: run scripts/setup-helm.sh (or "
                      "scripts/setup.sh) and reconfigure";
    }
    if (!fs::exists(chart_dir() + "/Chart.yaml")) {
      GTEST_SKIP() << "upstream HAMi's chart is not at " << chart_dir()
                   << ": set HAMI_UPSTREAM_CHART to a copy of its charts/hami (v2.10), or put it "
                      "at ../shared/reference/upstream-hami-chart-2.10 beside the repository";
    }
    fs::create_directories(dir_.file("bin"));
    fs::create_directories(dir_.file("tls"));
    // Upstream's binary names, as deploy/docker/*.Dockerfile link them.
    fs::create_symlink(SCHEDULER_BINARY, dir_.file("bin/scheduler"));
    fs::create_symlink(DEVICE_PLUGIN_BINARY, dir_.file("bin/nvidia-device-plugin"));
    fs::create_symlink(AGENT_BINARY, dir_.file("bin/vGPUmonitor"));
    CertAuthority ca;
    const CertAndKey server = ca.issue_server({"hami-scheduler.hami-system.svc"}, {});
    write(dir_.file("tls/tls.crt"), server.cert_pem);
    write(dir_.file("tls/tls.key"), server.key_pem);
  }

  static void write(const std::string& path, const std::string& text) {
    std::ofstream(path) << text;
  }

  // Runs container `name` of `r` as the kubelet would, with --check-flags.
  ProcessResult run(const Render& r, const std::string& name) {
    const auto it = r.containers.find(name);
    EXPECT_NE(it, r.containers.end()) << "no container " << name << " in the render";
    if (it == r.containers.end()) return {};
    const Container& c = it->second;
    // The chart's mounts: the scheduler's device ConfigMap at /device-config.yaml
    // (scheduler and device plugin), the TLS Secret at /tls.
    write(dir_.file("device-config.yaml"), r.files.at("hami-scheduler-device/device-config.yaml"));
    std::vector<std::string> argv;
    for (std::string a : c.command) {
      for (const char* mount : {"/device-config.yaml", "/tls/"}) {
        if (const size_t at = a.find(std::string("=") + mount); at != std::string::npos) {
          a = a.substr(0, at + 1) + dir_.path() + a.substr(at + 1);
        }
      }
      argv.push_back(a);
    }
    EXPECT_FALSE(argv.empty());
    if (argv.empty()) return {};
    argv[0] = dir_.file("bin/" + argv[0]);
    EXPECT_TRUE(fs::exists(argv[0])) << c.command[0] << " is not one of upstream's names we link";
    argv.push_back("--check-flags");
    if (name == "device-plugin") {
      write(dir_.file("config.json"), r.files.at("hami-device-plugin/config.json"));
      argv.push_back("--node-config-file=" + dir_.file("config.json"));
    }
    // Nothing from this machine's environment that the chart does not set.
    Env env = {{"KUBECONFIG", kUnset}, {"MIG_STRATEGY", kUnset}, {"CONFIG_FILE", kUnset}};
    for (const auto& kv : c.env)
      env.push_back(kv);
    ProcessResult p = run_process(argv, env);
    std::string line;
    for (const auto& a : argv)
      line += a + " ";
    last_command_ = line;
    return p;
  }

  std::string last_command_;
  TempDir dir_;
};

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v)
    s += x + " ";
  return s;
}

TEST_F(UpstreamChart, DefaultValuesRunEveryContainerOfOurs) {
  const Render r = render({});
  // What the issue names must really be on these command lines.
  const std::string ext = joined(r.containers.at("vgpu-scheduler-extender").command);
  for (const char* f :
       {"scheduler ", "--debug ", "-v=4 ", "--http_bind=0.0.0.0:443 ", "--cert_file=/tls/tls.crt ",
        "--key_file=/tls/tls.key ", "--leader-elect=true ",
        "--force-overwrite-default-scheduler=true ", "--metrics-bind-address=:9395 ",
        "--device-config-file=/device-config.yaml "}) {
    EXPECT_NE(ext.find(f), std::string::npos) << f << " not in: " << ext;
  }
  const std::string dp = joined(r.containers.at("device-plugin").command);
  for (const char* f :
       {"nvidia-device-plugin ", "--mig-strategy=none ", "--disable-core-limit=false ", "-v=4 ",
        "--config-file=/device-config.yaml "}) {
    EXPECT_NE(dp.find(f), std::string::npos) << f << " not in: " << dp;
  }

  ProcessResult s = run(r, "vgpu-scheduler-extender");
  EXPECT_EQ(s.exit_code, 0) << last_command_ << "\n" << s.err;
  EXPECT_NE(s.out.find("https on 0.0.0.0:443"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("metrics on :9395"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("policies binpack/spread"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("leader election hami-system/hami-scheduler"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("node lock timeout 5m"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("log level 4"), std::string::npos) << s.out;  // --debug, -v=4

  ProcessResult d = run(r, "device-plugin");
  EXPECT_EQ(d.exit_code, 0) << last_command_ << "\n" << d.err;
  EXPECT_NE(d.out.find("node your-node-name"), std::string::npos) << d.out;
  EXPECT_NE(d.out.find("hook path /usr/local"), std::string::npos) << d.out;
  EXPECT_NE(d.out.find("log level 4"), std::string::npos) << d.out;
  EXPECT_NE(d.out.find("disableCoreLimit=false"), std::string::npos) << d.out;

  ProcessResult m = run(r, "vgpu-monitor");
  EXPECT_EQ(m.exit_code, 0) << last_command_ << "\n" << m.err;
  EXPECT_NE(m.out.find("hook path /usr/local/vgpu"), std::string::npos) << m.out;
  EXPECT_NE(m.out.find("metrics on :9394"), std::string::npos) << m.out;
  EXPECT_NE(m.out.find("log level 4"), std::string::npos) << m.out;
}

TEST_F(UpstreamChart, WebhookOffServesPlainHttpOnPort80) {
  const Render r = render({"scheduler.admissionWebhook.enabled=false"});
  ProcessResult s = run(r, "vgpu-scheduler-extender");
  EXPECT_EQ(s.exit_code, 0) << last_command_ << "\n" << s.err;
  EXPECT_NE(s.out.find("http on 0.0.0.0:80,"), std::string::npos) << s.out;
}

TEST_F(UpstreamChart, EveryOtherBranchIsAcceptedWithItsMeaning) {
  const Render r = render({"scheduler.nodeLabelSelector.gpu=on",
                           "scheduler.nodeLabelSelector.zone=a",
                           "legacyMetrics=true",
                           "scheduler.leaderElect=false",
                           "scheduler.nodeLockExpire=2m",
                           "scheduler.defaultSchedulerPolicy.nodeSchedulerPolicy=spread",
                           "scheduler.defaultSchedulerPolicy.gpuSchedulerPolicy=topology-aware",
                           "scheduler.forceOverwriteDefaultScheduler=false",
                           "schedulerName=my-hami",
                           "devicePlugin.disablecorelimit=true",
                           "devicePlugin.passDeviceSpecsEnabled=false",
                           "devicePlugin.nvidiaDriverRoot=/run/nvidia/driver",
                           "devicePlugin.nvidiaHookPath=/usr/bin/nvidia-cdi-hook",
                           "devicePlugin.gdrcopyEnabled=false",
                           "devicePlugin.gdsEnabled=false",
                           "devicePlugin.mofedEnabled=false",
                           "devices.ascend.enabled=false",
                           "global.managedNodeSelectorEnable=true",
                           "devicePlugin.extraArgs={-v=2}",
                           "devicePlugin.monitor.extraArgs={--v=1}",
                           "scheduler.extender.extraArgs={--debug=false,-v=3}",
                           "scheduler.overwriteEnv=true",
                           "devicePlugin.runtimeClassName=nvidia"});
  ProcessResult s = run(r, "vgpu-scheduler-extender");
  EXPECT_EQ(s.exit_code, 0) << last_command_ << "\n" << s.err;
  // Upstream's device config carries both to the webhook.
  EXPECT_NE(s.out.find("runtime class nvidia"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("NVIDIA_VISIBLE_DEVICES=none without GPUs"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("scheduler name my-hami"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("policies spread/topology-aware"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("leader election off"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("node lock timeout 2m"), std::string::npos)
      << s.out;  // HAMI_NODELOCK_EXPIRE
  EXPECT_NE(s.out.find("nodes gpu=on,zone=a"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("log level 3"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("legacy metrics"), std::string::npos) << s.out;

  ProcessResult d = run(r, "device-plugin");
  EXPECT_EQ(d.exit_code, 0) << last_command_ << "\n" << d.err;
  EXPECT_NE(d.out.find("disableCoreLimit=true"), std::string::npos) << d.out;
  EXPECT_NE(d.out.find("log level 3"), std::string::npos) << d.out;
  // ENABLE_TOPOLOGY_SCORE=true (topology-aware): accepted, and the log says it changes nothing.
  EXPECT_NE(d.err.find("ENABLE_TOPOLOGY_SCORE=true"), std::string::npos) << d.err;

  ProcessResult m = run(r, "vgpu-monitor");
  EXPECT_EQ(m.exit_code, 0) << last_command_ << "\n" << m.err;
  EXPECT_NE(m.out.find("legacy metrics"), std::string::npos) << m.out;
  EXPECT_NE(m.out.find("log level 3"), std::string::npos) << m.out;
}

struct Refusal {
  std::string set;
  std::string container;
  std::string message;  // the named flag (and value) in the error
};

// CDI (docs/cdi.md): upstream's chart sets DEVICE_LIST_STRATEGY, and with
// nvidiaDriverRoot and nvidiaHookPath NVIDIA_DRIVER_ROOT and
// NVIDIA_CDI_HOOK_PATH; it mounts the driver root at /driver-root (our
// --driver-root-ctr-path default) and /var/run/cdi (where the spec goes).
TEST_F(UpstreamChart, CdiStrategiesAreAccepted) {
  for (const char* strategy : {"cdi-annotations", "cdi-cri", "envvar\\,cdi-cri"}) {
    SCOPED_TRACE(strategy);
    const Render r = render({std::string("devicePlugin.deviceListStrategy=") + strategy,
                             "devicePlugin.nvidiaDriverRoot=/run/nvidia/driver",
                             "devicePlugin.nvidiaHookPath=/usr/bin/nvidia-cdi-hook"});
    ProcessResult d = run(r, "device-plugin");
    EXPECT_EQ(d.exit_code, 0) << last_command_ << "\n" << d.err;
    std::string want = strategy;
    want.erase(std::remove(want.begin(), want.end(), '\\'), want.end());
    EXPECT_NE(d.out.find("device list " + want + " (CDI spec in /var/run/cdi)"), std::string::npos)
        << d.out;
  }
}

TEST_F(UpstreamChart, FeaturesThisBuildLacksAreRefusedByName) {
  const std::vector<Refusal> cases = {
      {"devices.ascend.enabled=true", "vgpu-scheduler-extender", "--enable-ascend=true"},
      {"devices.iluvatar.enabled=true", "vgpu-scheduler-extender", "--enable-iluvatar=true"},
      {"devicePlugin.migStrategy=mixed", "device-plugin", "--mig-strategy=mixed"},
      {"devicePlugin.deviceListStrategy=volume-mounts", "device-plugin",
       "--device-list-strategy=volume-mounts"},
      {"devicePlugin.passDeviceSpecsEnabled=true", "device-plugin",
       "--pass-device-specs=true (PASS_DEVICE_SPECS)"},
      {"devicePlugin.gdrcopyEnabled=true", "device-plugin",
       "--gdrcopy-enabled=true (GDRCOPY_ENABLED)"},
      {"devicePlugin.gdsEnabled=true", "device-plugin", "--gds-enabled=true (GDS_ENABLED)"},
      {"devicePlugin.mofedEnabled=true", "device-plugin", "--mofed-enabled=true (MOFED_ENABLED)"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.set);
    const Render r = render({c.set});
    ProcessResult p = run(r, c.container);
    EXPECT_EQ(p.exit_code, 2) << last_command_ << "\n" << p.out << p.err;
    EXPECT_NE(p.err.find(c.message + ": not supported by this build: "), std::string::npos)
        << p.err;
    EXPECT_EQ(p.err.find('\n'), p.err.size() - 1) << "one line: " << p.err;
  }
}

// Link path -> the file it names, from every `ln -s` in the image Dockerfiles
// (a bare name is in /usr/local/bin, where the binaries are).
std::map<std::string, std::string> image_links() {
  std::map<std::string, std::string> links;
  for (const char* f : {"scheduler.Dockerfile", "device-plugin.Dockerfile"}) {
    std::ifstream in(std::string(HAMI_SOURCE_DIR) + "/deploy/docker/" + f);
    EXPECT_TRUE(in) << f;
    std::stringstream text;
    text << in.rdbuf();
    const std::string s = text.str();
    // "ln -s TARGET LINK" (std::regex trips GCC 12's -Wmaybe-uninitialized under ASan).
    for (size_t at = s.find("ln -s "); at != std::string::npos; at = s.find("ln -s ", at + 1)) {
      std::istringstream words(s.substr(at + 6, 512));
      std::string target, link;
      if (!(words >> target >> link)) continue;
      if (link.find('/') == std::string::npos) link = "/usr/local/bin/" + link;
      links[link] = fs::path(target).filename();
    }
  }
  return links;
}

// Without the chart: the names upstream v2.10's chart is known to run.
TEST(UpstreamNames, ImagesLinkThemToOurs) {
  auto links = image_links();
  EXPECT_EQ(links["/usr/local/bin/scheduler"], "hami-scheduler");
  EXPECT_EQ(links["/usr/local/bin/nvidia-device-plugin"], "hami-device-plugin");
  EXPECT_EQ(links["/usr/local/bin/vGPUmonitor"], "hami-node-agent");
  EXPECT_EQ(links["/k8s-vgpu/bin/vgpu-init.sh"], "vgpu-init.sh");
}

// With the chart: every name it executes in our containers.
TEST_F(UpstreamChart, ImagesLinkUpstreamsBinaryNamesToOurs) {
  const Render r = render({});
  auto links = image_links();
  const std::map<std::string, std::string> ours = {{"vgpu-scheduler-extender", "hami-scheduler"},
                                                   {"device-plugin", "hami-device-plugin"},
                                                   {"vgpu-monitor", "hami-node-agent"}};
  for (const auto& [container, binary] : ours) {
    const std::string name = r.containers.at(container).command.at(0);
    const std::string path = name.find('/') == std::string::npos ? "/usr/local/bin/" + name : name;
    EXPECT_EQ(links[path], binary) << container << " runs " << name;
  }
  // The postStart hook: "/k8s-vgpu/bin/vgpu-init.sh /usr/local/vgpu/".
  const std::string hook = r.containers.at("device-plugin").post_start;
  const std::string script = hook.substr(0, hook.find(' '));
  EXPECT_EQ(links[script], "vgpu-init.sh") << hook;
}

}  // namespace
}  // namespace hami::test
