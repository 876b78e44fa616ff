// The text exposition format as Prometheus parses it: escaping, grouping, and
// the metric families the node agent promises.
#include "monitor/metrics.hpp"

#include <gtest/gtest.h>

#include <cctype>
#include <set>
#include <sstream>

#include "common/prometheus_text.hpp"

namespace hami::monitor {
namespace {

// Checks what a Prometheus scraper requires of text format 0.0.4: each family
// has one TYPE line before its samples, samples of a family are contiguous,
// names and label syntax are valid. Returns "" or the first problem. (Hand-
// written: std::regex trips GCC 12's -Wmaybe-uninitialized under ASan.)
bool name_char(char c, bool first) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':' ||
         (!first && std::isdigit(static_cast<unsigned char>(c)));
}

// Consumes a metric or label name at `pos`; false when there is none.
bool take_name(const std::string& l, size_t& pos, bool colon_ok) {
  const size_t start = pos;
  while (pos < l.size() && name_char(l[pos], pos == start) && (colon_ok || l[pos] != ':'))
    ++pos;
  return pos > start;
}

// "" or what is wrong with one sample line; `name` receives the metric name.
std::string check_sample(const std::string& l, std::string& name) {
  size_t pos = 0;
  if (!take_name(l, pos, true)) return "bad metric name";
  name = l.substr(0, pos);
  if (pos < l.size() && l[pos] == '{') {
    ++pos;
    while (pos < l.size() && l[pos] != '}') {
      if (!take_name(l, pos, false)) return "bad label name";
      if (l.compare(pos, 2, "=\"") != 0) return "label without =\"";
      pos += 2;
      while (pos < l.size() && l[pos] != '"') {
        if (l[pos] == '\\') {
          if (pos + 1 >= l.size() || std::string("\\\"n").find(l[pos + 1]) == std::string::npos)
            return "bad escape";
          ++pos;
        } else if (l[pos] == '\n') {
          return "raw newline in a label value";
        }
        ++pos;
      }
      if (pos >= l.size()) return "unterminated label value";
      ++pos;
      if (pos < l.size() && l[pos] == ',') ++pos;
    }
    if (pos >= l.size()) return "unterminated labels";
    ++pos;
  }
  if (pos >= l.size() || l[pos] != ' ') return "no space before the value";
  const std::string value = l.substr(pos + 1);
  if (value == "NaN" || value == "+Inf" || value == "-Inf") return "";
  if (value.empty() || value.find_first_not_of("0123456789.e+-") != std::string::npos)
    return "bad value";
  return "";
}

std::string validate_exposition(const std::string& text) {
  std::set<std::string> done;
  std::string current;
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    const std::string where = "line " + std::to_string(n) + ": ";
    if (line.rfind("# HELP ", 0) == 0) continue;
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream t(line.substr(7));
      std::string fam, type, extra;
      t >> fam >> type;
      if (fam.empty() || (type != "gauge" && type != "counter" && type != "untyped") ||
          (t >> extra))
        return where + line;
      if (!done.insert(fam).second) return where + "family repeated";
      current = fam;
      continue;
    }
    std::string name;
    if (std::string why = check_sample(line, name); !why.empty()) return where + why + ": " + line;
    if (name != current) return where + "sample outside its family";
  }
  return "";
}

TEST(PrometheusText, EscapesLabelValuesAndHelp) {
  PrometheusText out;
  out.set_const_labels({{"zone", "vGPU"}});
  out.family("m", "help with \\ and\nnewline");
  out.sample("m", {{"a", "x\"y\\z\nw"}}, uint64_t{18446744073709551615u});
  out.sample("m", {}, -3.5);
  EXPECT_EQ(out.text(),
            "# HELP m help with \\\\ and\\nnewline\n# TYPE m gauge\n"
            "m{a=\"x\\\"y\\\\z\\nw\",zone=\"vGPU\"} 18446744073709551615\n"
            "m{zone=\"vGPU\"} -3.5\n");
  EXPECT_EQ(validate_exposition(out.text()), "");
}

// Label values come from file names too; one byte that is not UTF-8 made a
// scraper reject the agent's whole page.
TEST(PrometheusText, BytesThatAreNotUtf8BecomeReplacementCharacters) {
  PrometheusText out;
  out.family("m", "help");
  out.sample("m", {{"container", "main\xc3("}, {"pod", "uid-\xff\xfe"}, {"ok", "caf\xc3\xa9"}},
             uint64_t{1});
  EXPECT_EQ(out.text(),
            "# HELP m help\n# TYPE m gauge\n"
            "m{container=\"main\xef\xbf\xbd(\",pod=\"uid-\xef\xbf\xbd\xef\xbf\xbd\","
            "ok=\"caf\xc3\xa9\"} 1\n");
}

TEST(PrometheusText, ValidatorCatchesBrokenText) {
  EXPECT_NE(validate_exposition("# TYPE m gauge\nm{a=\"x} 1\n"), "");
  EXPECT_NE(validate_exposition("# TYPE m gauge\nm 1\n# TYPE n gauge\nn 1\nm 2\n"), "");
}

NodeView sample_view() {
  NodeView v;
  v.node = "node-1";
  v.taken = std::chrono::system_clock::time_point(std::chrono::seconds(1'700'000'100));
  v.gpus.push_back(GpuSample{.index = 0,
                             .uuid = "GPU-a",
                             .name = "NVIDIA H200",
                             .memory_total = 100,
                             .memory_used = 40,
                             .utilization = 55,
                             .memory_utilization = 7});
  v.gpus.push_back(GpuSample{.index = 1, .uuid = "GPU-b", .error = "GPU is lost"});
  ContainerView c;
  c.ref = {"uid-1", "main"};
  c.pod_namespace = "ns";
  c.pod_name = "p\"1";  // must be escaped
  c.last_kernel_time = 1'700'000'090;
  c.devices.push_back(ContainerDevice{.vdevice_index = 0,
                                      .uuid = "GPU-a",
                                      .memory_limit = 64,
                                      .sm_limit = 30,
                                      .used = 12,
                                      .sm_util = 29});
  c.devices.push_back(ContainerDevice{.vdevice_index = 1, .uuid = ""});  // skipped
  c.processes.push_back(ContainerProcess{.slot = 0, .pid = 1, .live = true});
  v.containers.push_back(c);
  ContainerView anon;
  anon.ref = {"uid-2", "side"};
  anon.devices.push_back(ContainerDevice{.vdevice_index = 0, .uuid = "GPU-a"});
  v.containers.push_back(anon);
  return v;
}

TEST(Metrics, RendersValidTextWithUpstreamNames) {
  const std::string text = render_metrics(sample_view(), {.version = "1.0", .legacy = true});
  EXPECT_EQ(validate_exposition(text), "") << text;
  for (const char* family :
       {"hami_host_gpu_memory_used_bytes", "hami_host_gpu_utilization_ratio",
        "hami_host_gpu_memory_controller_utilization_ratio", "hami_vgpu_memory_used_bytes",
        "hami_vgpu_memory_limit_bytes", "hami_container_device_memory_bytes",
        "hami_container_device_utilization_ratio", "hami_vgpu_memory_context_bytes",
        "hami_vgpu_memory_module_bytes", "hami_vgpu_memory_buffer_bytes",
        "hami_container_last_kernel_elapsed_seconds", "hami_build_info", "HostGPUMemoryUsage",
        "HostCoreUtilization", "vGPU_device_memory_usage_in_bytes",
        "vGPU_device_memory_limit_in_bytes", "Device_utilization_desc_of_container",
        "Device_memory_desc_of_container", "Device_last_kernel_of_container"}) {
    EXPECT_NE(text.find(std::string("# TYPE ") + family + " "), std::string::npos) << family;
  }
  // Memory-controller utilisation carries no node label, as upstream.
  EXPECT_NE(text.find("hami_host_gpu_memory_controller_utilization_ratio{device_index=\"0\","
                      "device_uuid=\"GPU-a\",device_type=\"NVIDIA-NVIDIA H200\",zone=\"vGPU\"} 7"),
            std::string::npos);
  // A GPU that failed to sample exports nothing rather than zeros.
  EXPECT_EQ(text.find("GPU-b"), std::string::npos);
  EXPECT_NE(text.find("hami_container_last_kernel_elapsed_seconds{namespace=\"ns\",pod=\"p\\\"1\","
                      "container=\"main\",vdevice_index=\"0\",device_uuid=\"GPU-a\",zone=\"vGPU\"} "
                      "10\n"),
            std::string::npos)
      << text;
  // Unknown pod name: the UID stands in; no device without a UUID is exported.
  EXPECT_NE(
      text.find("hami_vgpu_memory_used_bytes{namespace=\"\",pod=\"uid-2\",container=\"side\""),
      std::string::npos);
  EXPECT_EQ(text.find("vdevice_index=\"1\""), std::string::npos);
  EXPECT_NE(text.find("hami_container_device_sm_limit_ratio{namespace=\"\",pod=\"uid-2\","
                      "container=\"side\",vdevice_index=\"0\",device_uuid=\"GPU-a\",zone=\"vGPU\"} "
                      "100\n"),
            std::string::npos);
  // Upstream's legacy node metrics name the node as nodeid.
  EXPECT_NE(text.find("HostGPUMemoryUsage{nodeid=\"node-1\",deviceidx=\"0\",deviceuuid=\"GPU-a\","
                      "devicetype=\"NVIDIA-NVIDIA H200\",zone=\"vGPU\"} 40\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("HostCoreUtilization{nodeid=\"node-1\",deviceidx=\"0\",deviceuuid=\"GPU-a\","
                      "devicetype=\"NVIDIA-NVIDIA H200\",zone=\"vGPU\"} 55\n"),
            std::string::npos);
  EXPECT_NE(text.find("Device_last_kernel_of_container{podnamespace=\"ns\",podname=\"p\\\"1\","
                      "ctrname=\"main\",vdeviceid=\"0\",deviceuuid=\"GPU-a\",zone=\"vGPU\"} 10\n"),
            std::string::npos);
  // hami_build_info with upstream's labels and without the zone label.
  const auto bi = text.find("hami_build_info{version=\"");
  ASSERT_NE(bi, std::string::npos);
  const std::string build = text.substr(bi, text.find('\n', bi) - bi);
  for (const char* label : {"revision=", "build_date=", "go_version=", "compiler=", "platform="})
    EXPECT_NE(build.find(label), std::string::npos) << build;
  EXPECT_EQ(build.find("zone="), std::string::npos) << build;
  // Legacy names are only there when asked for.
  const std::string modern = render_metrics(sample_view(), {.version = "1.0"});
  EXPECT_EQ(modern.find("HostGPUMemoryUsage"), std::string::npos);
  EXPECT_EQ(validate_exposition(modern), "");
}

// A MIG device (docs/mig.md): upstream's hami_mig_device_info for the
// container on it; host series for GPUs only (a MIG device's memory is part
// of its GPU's).
TEST(Metrics, MigDevicesOfContainers) {
  NodeView v;
  v.node = "node-1";
  v.gpus.push_back(
      GpuSample{.index = 0, .uuid = "GPU-p", .name = "NVIDIA H200", .memory_total = 141ull << 30});
  GpuSample m{.index = 0,
              .uuid = "MIG-1",
              .name = "NVIDIA H200 MIG 3g.71gb",
              .memory_total = 71ull << 30,
              .memory_used = 5};
  m.mig = MigOf{"GPU-p", "3g.71gb", 2, 0};
  v.gpus.push_back(m);
  ContainerView c;
  c.ref = {"uid-1", "main"};
  c.pod_namespace = "ml";
  c.pod_name = "p";
  c.devices.push_back({.vdevice_index = 0, .uuid = "MIG-1", .memory_limit = 4ull << 30});
  v.containers.push_back(c);
  const std::string text = render_metrics(v, {.version = "1.0"});
  EXPECT_EQ(validate_exposition(text), "") << text;
  EXPECT_NE(text.find("hami_mig_device_info{namespace=\"ml\",pod=\"p\",container=\"main\","
                      "vdevice_index=\"0\",device_uuid=\"GPU-p\",mig_uuid=\"MIG-1\","
                      "profile=\"3g.71gb\",gpu_instance_id=\"2\",compute_instance_id=\"0\","
                      "zone=\"vGPU\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("hami_host_gpu_memory_total_bytes{node=\"node-1\",device_index=\"0\","
                      "device_uuid=\"GPU-p\""),
            std::string::npos);
  EXPECT_EQ(text.find("hami_host_gpu_memory_total_bytes{node=\"node-1\",device_index=\"0\","
                      "device_uuid=\"MIG-1\""),
            std::string::npos);
  EXPECT_NE(text.find("hami_vgpu_memory_limit_bytes{namespace=\"ml\",pod=\"p\",container=\"main\","
                      "vdevice_index=\"0\",device_uuid=\"MIG-1\""),
            std::string::npos);
}

}  // namespace
}  // namespace hami::monitor
