#include "deviceplugin/cdi.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>

#include "common/go_flags.hpp"
#include "protocol/container_contract.hpp"

namespace hami::deviceplugin::cdi {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

bool letter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
bool alnum(char c) {
  return letter(c) || (c >= '0' && c <= '9');
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at - start));
    if (at == std::string::npos) return out;
    start = at + 1;
  }
}

// The reference parser's vendor and class rule: a letter first, an
// alphanumeric last, [-_.A-Za-z0-9] between.
std::optional<std::string> vendor_or_class_problem(const std::string& what, const std::string& s) {
  if (s.empty()) return what + " is empty";
  if (!letter(s.front())) return what + " '" + s + "' does not start with a letter";
  if (!alnum(s.back())) return what + " '" + s + "' does not end with a letter or digit";
  for (char c : s) {
    if (!alnum(c) && c != '-' && c != '_' && c != '.')
      return what + " '" + s + "' holds '" + std::string(1, c) + "'";
  }
  return std::nullopt;
}

// A DNS subdomain as Kubernetes checks one: lower-case labels of
// [a-z0-9-], alphanumeric at both ends, at most 63 characters each, 253 in all.
std::optional<std::string> dns_subdomain_problem(const std::string& s) {
  if (s.empty()) return "is empty";
  if (s.size() > 253) return "is longer than 253 characters";
  for (const std::string& label : split(s, '.')) {
    if (label.empty()) return "has an empty DNS label";
    if (label.size() > 63) return "has a DNS label longer than 63 characters";
    for (char c : label) {
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
        return "holds '" + std::string(1, c) + "' (DNS labels are [a-z0-9-])";
    }
    if (label.front() == '-' || label.back() == '-')
      return "has a DNS label starting or ending with '-'";
  }
  return std::nullopt;
}

bool absolute(const json& v) {
  return v.is_string() && !v.get<std::string>().empty() && v.get<std::string>()[0] == '/';
}

// "x.y.z" with numbers, compared numerically.
std::optional<std::array<int, 3>> semver(const std::string& v) {
  const auto parts = split(v, '.');
  if (parts.size() != 3) return std::nullopt;
  std::array<int, 3> out{};
  for (size_t i = 0; i < 3; ++i) {
    const std::string& p = parts[i];
    if (p.empty() || p.size() > 6 || (p.size() > 1 && p[0] == '0') ||
        !std::all_of(p.begin(), p.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return std::nullopt;
    out[i] = std::stoi(p);
  }
  return out;
}

// The released spec versions a runtime's CDI library knows; 0.3.0 is the
// earliest the reference library still reads.
const std::vector<std::string>& released() {
  static const std::vector<std::string> v = {"0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0"};
  return v;
}

void check_edits(const json& edits, const std::string& where, std::vector<std::string>& bad) {
  if (!edits.is_object()) {
    bad.push_back(where + ": containerEdits is not an object");
    return;
  }
  if (edits.contains("env")) {
    for (const json& e : edits["env"]) {
      const std::string s = e.is_string() ? e.get<std::string>() : "";
      if (s.find('=') == std::string::npos || s[0] == '=')
        bad.push_back(where + ": env entry " + e.dump() + " is not VAR=value");
    }
  }
  if (edits.contains("deviceNodes")) {
    for (const json& n : edits["deviceNodes"]) {
      if (!n.is_object() || !absolute(n.value("path", json())))
        bad.push_back(where + ": device node " + n.dump() + " has no absolute path");
      else if (n.contains("hostPath") && !absolute(n["hostPath"]))
        bad.push_back(where + ": device node hostPath " + n["hostPath"].dump() +
                      " is not absolute");
      if (n.is_object() && n.contains("permissions")) {
        const std::string p =
            n["permissions"].is_string() ? n["permissions"].get<std::string>() : std::string("?");
        if (p.find_first_not_of("rwm") != std::string::npos)
          bad.push_back(where + ": device node permissions '" + p + "' are not of r, w, m");
      }
    }
  }
  if (edits.contains("mounts")) {
    for (const json& m : edits["mounts"]) {
      if (!m.is_object() || !absolute(m.value("hostPath", json())) ||
          !absolute(m.value("containerPath", json())))
        bad.push_back(where + ": mount " + m.dump() +
                      " lacks an absolute hostPath or containerPath");
    }
  }
  if (edits.contains("hooks")) {
    static const std::set<std::string> names = {
        "prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop"};
    for (const json& h : edits["hooks"]) {
      if (!h.is_object() || !names.contains(h.value("hookName", std::string())))
        bad.push_back(where + ": hook " + h.dump() + " has no OCI hook name");
      else if (!absolute(h.value("path", json())))
        bad.push_back(where + ": hook path " + h.value("path", json()).dump() + " is not absolute");
      else if (h.contains("timeout") && !(h["timeout"].is_number_integer() && h["timeout"] > 0))
        bad.push_back(where + ": hook timeout " + h["timeout"].dump() + " is not above 0");
    }
  }
}

std::string random_id() {
  std::random_device rd;
  char out[33];
  for (int i = 0; i < 4; ++i)
    std::snprintf(out + 8 * i, 9, "%08x", static_cast<unsigned>(rd()));
  return out;
}

std::string host_path(const std::string& driver_root, const std::string& path) {
  std::string root = driver_root;
  while (!root.empty() && root.back() == '/')
    root.pop_back();
  return root + path;
}

// The regular file `path` (under root, as the container sees it) is or
// links to, as a path under root; links are followed inside root, at most 8.
std::optional<std::string> resolve_in_root(const std::string& root, std::string path) {
  for (int hop = 0; hop < 8; ++hop) {
    std::error_code ec;
    const fs::path on_disk = fs::path(root) / fs::path(path).relative_path();
    const fs::file_status st = fs::symlink_status(on_disk, ec);
    if (ec) return std::nullopt;
    if (fs::is_regular_file(st)) return path;
    if (!fs::is_symlink(st)) return std::nullopt;
    const fs::path target = fs::read_symlink(on_disk, ec);
    if (ec) return std::nullopt;
    path = (target.is_absolute() ? target : fs::path(path).parent_path() / target)
               .lexically_normal()
               .string();
  }
  return std::nullopt;
}

// "<base>.so.<digits and dots>".
bool versioned_name(const std::string& name, const std::string& base) {
  const std::string stem = base + ".so.";
  if (name.size() <= stem.size() || name.compare(0, stem.size(), stem) != 0) return false;
  const std::string rest = name.substr(stem.size());
  return alnum(rest.back()) && std::all_of(rest.begin(), rest.end(), [](char c) {
           return (c >= '0' && c <= '9') || c == '.';
         });
}

}  // namespace

std::string kind() {
  return std::string(kVendor) + "/" + kClass;
}

std::string qualified_name(const std::string& device) {
  return kind() + "=" + device;
}

Result<DeviceListStrategy> parse_strategy(const std::string& list) {
  DeviceListStrategy s;
  for (const std::string& one : split(list, ',')) {
    if (one == "envvar") {
      s.envvar = true;
    } else if (one == "cdi-annotations") {
      s.annotations = true;
    } else if (one == "cdi-cri") {
      s.cri = true;
    } else if (one == "volume-mounts") {
      return Error{goflags::not_supported("--device-list-strategy=volume-mounts",
                                          "use envvar, cdi-annotations or cdi-cri")};
    } else {
      return Error{"--device-list-strategy: unknown strategy '" + one +
                   "' (envvar, cdi-annotations, cdi-cri; comma-separated)"};
    }
  }
  return s;
}

std::optional<std::string> kind_problem(const std::string& k) {
  const size_t slash = k.find('/');
  if (slash == std::string::npos) return "kind '" + k + "' is not of the form vendor/class";
  const std::string vendor = k.substr(0, slash), cls = k.substr(slash + 1);
  if (auto p = vendor_or_class_problem("vendor", vendor)) return "kind '" + k + "': " + *p;
  if (vendor.size() > 253) return "kind '" + k + "': vendor is longer than 253 characters";
  if (cls.find('/') != std::string::npos) return "kind '" + k + "' has more than one '/'";
  if (auto p = vendor_or_class_problem("class", cls)) return "kind '" + k + "': " + *p;
  if (cls.size() > 63) return "kind '" + k + "': class is longer than 63 characters";
  return std::nullopt;
}

std::optional<std::string> device_name_problem(const std::string& n) {
  if (n.empty()) return "device name is empty";
  if (!alnum(n.front()) || !alnum(n.back()))
    return "device name '" + n + "' does not start and end with a letter or digit";
  for (char c : n) {
    if (!alnum(c) && c != '-' && c != '_' && c != '.' && c != ':')
      return "device name '" + n + "' holds '" + std::string(1, c) + "'";
  }
  return std::nullopt;
}

std::optional<std::string> qualified_name_problem(const std::string& n) {
  const size_t eq = n.find('=');
  if (eq == std::string::npos) return "'" + n + "' is not of the form vendor/class=name";
  if (auto p = kind_problem(n.substr(0, eq))) return *p;
  return device_name_problem(n.substr(eq + 1));
}

Result<void> check_annotation_prefix(const std::string& prefix) {
  const std::string what = "--cdi-annotation-prefix '" + prefix + "'";
  if (prefix.empty() || prefix.back() != '/')
    return Error{what + ": an annotation key prefix ends with '/', as cdi.k8s.io/"};
  const std::string domain = prefix.substr(0, prefix.size() - 1);
  if (auto p = dns_subdomain_problem(domain))
    return Error{what + ": the part before '/' " + *p + "; it must be a DNS subdomain"};
  return {};
}

Result<std::string> annotation_key(const std::string& prefix, const std::string& plugin,
                                   const std::string& id) {
  std::string name = plugin + "_" + id;
  std::replace(name.begin(), name.end(), '/', '_');
  if (plugin.empty() || id.empty()) return Error{"CDI annotation: empty plugin name or ID"};
  if (name.size() > 63)
    return Error{"CDI annotation name '" + name + "' is longer than 63 characters"};
  if (!alnum(name.front()) || !alnum(name.back()))
    return Error{"CDI annotation name '" + name + "' does not start and end alphanumeric"};
  for (char c : name) {
    if (!alnum(c) && c != '-' && c != '_' && c != '.')
      return Error{"CDI annotation name '" + name + "' holds '" + std::string(1, c) + "'"};
  }
  return prefix + name;
}

DriverFiles find_driver_files(const std::string& root) {
  DriverFiles out;
  std::error_code ec;
  const fs::path r(root);
  for (const char* node : {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"}) {
    if (fs::exists(r / "dev" / node, ec)) out.device_nodes.push_back(std::string("/dev/") + node);
  }
  // What CUDA, NVML and nvidia-smi load from the driver (NVIDIA's "compute"
  // and "utility" capabilities).
  static const std::vector<std::string> libs = {
      "libcuda",          "libcudadebugger",   "libnvidia-ml",        "libnvidia-ptxjitcompiler",
      "libnvidia-nvvm",   "libnvidia-gpucomp", "libnvidia-allocator", "libnvidia-cfg",
      "libnvidia-opencl", "libnvidia-nscq",    "libnvidia-pkcs11",    "libnvidia-pkcs11-openssl3"};
  // Debian, RHEL and the GPU operator's driver container layouts; /lib is
  // often a link to /usr/lib, so a directory seen twice is read once.
  std::set<std::pair<dev_t, ino_t>> seen;
  for (const char* dir :
       {"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64",
        "/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu", "/lib64", "/usr/lib"}) {
    const fs::path on_disk = r / fs::path(dir).relative_path();
    struct stat st {};
    if (::stat(on_disk.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    if (!seen.insert({st.st_dev, st.st_ino}).second) continue;
    std::vector<DriverFile> found;
    for (const auto& entry : fs::directory_iterator(on_disk, ec)) {
      const std::string name = entry.path().filename().string();
      if (!std::any_of(libs.begin(), libs.end(),
                       [&](const std::string& b) { return versioned_name(name, b); }))
        continue;
      const std::string path = std::string(dir) + "/" + name;
      if (auto source = resolve_in_root(root, path)) found.push_back({path, *source});
    }
    if (found.empty()) continue;
    std::sort(found.begin(), found.end(),
              [](const DriverFile& a, const DriverFile& b) { return a.path < b.path; });
    out.libraries.insert(out.libraries.end(), found.begin(), found.end());
    out.library_dirs.push_back(dir);
  }
  for (const char* tool : {"nvidia-smi", "nvidia-debugdump", "nvidia-persistenced",
                           "nvidia-cuda-mps-control", "nvidia-cuda-mps-server"}) {
    const std::string path = std::string("/usr/bin/") + tool;
    if (auto source = resolve_in_root(root, path)) out.binaries.push_back({path, *source});
  }
  return out;
}

json build_spec(const SpecInput& in) {
  const bool on_host_root = host_path(in.driver_root, "").empty();
  auto node = [&](const std::string& path) {
    json n = {{"path", path}};
    if (!on_host_root) n["hostPath"] = host_path(in.driver_root, path);
    return n;
  };
  json devices = json::array();
  for (const SpecGpu& g : in.gpus) {
    devices.push_back(
        {{"name", g.uuid},
         {"containerEdits",
          {{"deviceNodes", json::array({node("/dev/nvidia" + std::to_string(g.minor))})}}}});
  }
  json edits = {{"env", json::array({std::string(protocol::kEnvNvidiaVisible) + "=void"})}};
  json nodes = json::array();
  for (const std::string& n : in.driver.device_nodes)
    nodes.push_back(node(n));
  if (!nodes.empty()) edits["deviceNodes"] = nodes;
  json mounts = json::array();
  for (const auto* files : {&in.driver.libraries, &in.driver.binaries}) {
    for (const DriverFile& f : *files) {
      mounts.push_back({{"hostPath", host_path(in.driver_root, f.source)},
                        {"containerPath", f.path},
                        {"options", json::array({"ro", "nosuid", "nodev", "bind"})}});
    }
  }
  if (!mounts.empty()) edits["mounts"] = mounts;
  // ldconfig in the container: the libraries are found by soname whatever
  // directories the image's loader searches.
  if (!in.hook_path.empty() && !in.driver.library_dirs.empty()) {
    json args = json::array({"nvidia-cdi-hook", "update-ldcache"});
    for (const std::string& d : in.driver.library_dirs) {
      args.push_back("--folder");
      args.push_back(d);
    }
    edits["hooks"] =
        json::array({{{"hookName", "createContainer"}, {"path", in.hook_path}, {"args", args}}});
  }
  json spec = {
      {"cdiVersion", "0.3.0"}, {"kind", kind()}, {"devices", devices}, {"containerEdits", edits}};
  spec["cdiVersion"] = min_version(spec);
  return spec;
}

std::string min_version(const json& spec) {
  std::vector<const json*> edits;
  if (spec.contains("containerEdits")) edits.push_back(&spec["containerEdits"]);
  bool v050 = false, v040 = false;
  if (spec.contains("devices") && spec["devices"].is_array()) {
    for (const json& d : spec["devices"]) {
      if (!d.is_object()) continue;
      const std::string name = d.value("name", std::string());
      if (!name.empty() && !letter(name[0])) v050 = true;
      if (d.contains("containerEdits")) edits.push_back(&d["containerEdits"]);
    }
  }
  for (const json* e : edits) {
    if (!e->is_object()) continue;
    for (const json& n : e->value("deviceNodes", json::array()))
      if (n.is_object() && n.contains("hostPath")) v050 = true;
    for (const json& m : e->value("mounts", json::array()))
      if (m.is_object() && m.contains("type")) v040 = true;
  }
  return v050 ? "0.5.0" : v040 ? "0.4.0" : "0.3.0";
}

std::vector<std::string> validate_spec(const json& spec) {
  std::vector<std::string> bad;
  if (!spec.is_object()) return {"the spec is not a JSON object"};
  const std::string version = spec.value("cdiVersion", std::string());
  const auto v = semver(version);
  if (!v) {
    bad.push_back("cdiVersion '" + version + "' is not a semantic version x.y.z");
  } else if (std::find(released().begin(), released().end(), version) == released().end()) {
    bad.push_back("cdiVersion " + version + " is not a released CDI version (0.3.0 to 0.8.0)");
  } else if (*v < *semver(min_version(spec))) {
    bad.push_back("cdiVersion " + version + " is below " + min_version(spec) +
                  ", the version the spec's content needs");
  }
  if (!spec.contains("kind") || !spec["kind"].is_string()) {
    bad.push_back("kind is missing");
  } else if (auto p = kind_problem(spec["kind"].get<std::string>())) {
    bad.push_back(*p);
  }
  if (!spec.contains("devices") || !spec["devices"].is_array() || spec["devices"].empty()) {
    bad.push_back("devices is missing or empty (a spec needs at least one device)");
  } else {
    std::set<std::string> names;
    for (const json& d : spec["devices"]) {
      const std::string name = d.is_object() && d.contains("name") && d["name"].is_string()
                                   ? d["name"].get<std::string>()
                                   : std::string();
      if (auto p = device_name_problem(name)) bad.push_back(*p);
      if (!names.insert(name).second) bad.push_back("device name '" + name + "' is used twice");
      if (!d.is_object() || !d.contains("containerEdits"))
        bad.push_back("device '" + name + "' has no containerEdits");
      else
        check_edits(d["containerEdits"], "device '" + name + "'", bad);
    }
  }
  if (spec.contains("containerEdits")) check_edits(spec["containerEdits"], "the spec", bad);
  return bad;
}

std::string spec_file_name() {
  return std::string(kVendor) + "-" + kClass + ".json";
}

Result<std::string> write_spec(const std::string& dir, const json& spec) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Error{"cannot create the CDI spec directory " + dir + ": " + ec.message()};
  const std::string target = (fs::path(dir) / spec_file_name()).string();
  std::string tmpl = (fs::path(dir) / ("." + spec_file_name() + ".XXXXXX")).string();
  const int fd = ::mkostemp(tmpl.data(), O_CLOEXEC);
  if (fd < 0) return Error{"cannot write in " + dir + ": " + std::strerror(errno)};
  const std::string text = spec.dump(2) + "\n";
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  // Readable by the runtime whatever the plugin's umask.
  const bool ok = done == text.size() && ::fchmod(fd, 0644) == 0 && ::fsync(fd) == 0;
  const int saved = errno;
  ::close(fd);
  if (!ok || ::rename(tmpl.c_str(), target.c_str()) != 0) {
    const std::string why = std::strerror(ok ? errno : saved);
    ::unlink(tmpl.c_str());
    return Error{"cannot write the CDI spec " + target + ": " + why};
  }
  return target;
}

Result<std::string> refresh_spec(const Options& o, const std::vector<SpecGpu>& gpus) {
  std::error_code ec;
  const std::string root =
      fs::is_directory(o.driver_root_ctr_path, ec) ? o.driver_root_ctr_path : o.driver_root;
  SpecInput in{.gpus = gpus,
               .driver = find_driver_files(root),
               .driver_root = o.driver_root,
               .hook_path = o.hook_path};
  const json spec = build_spec(in);
  if (auto bad = validate_spec(spec); !bad.empty()) {
    std::string all;
    for (const std::string& b : bad)
      all += (all.empty() ? "" : "; ") + b;
    return Error{"the CDI spec for these GPUs would break the CDI rules: " + all};
  }
  return write_spec(o.spec_dir, spec);
}

Result<void> apply_device_list(ContainerPlan& plan, const DeviceListStrategy& strategy,
                               const std::string& annotation_prefix) {
  if (!strategy.cdi()) return {};
  std::vector<std::string> names;
  const auto visible = plan.envs.find(protocol::kEnvNvidiaVisible);
  if (visible != plan.envs.end() && !visible->second.empty()) {
    for (const std::string& id : split(visible->second, ',')) {
      if (auto p = device_name_problem(id)) return Error{"CDI: " + *p};
      names.push_back(qualified_name(id));
    }
  }
  if (names.empty()) return Error{"CDI: the container has no GPUs to name"};
  if (strategy.annotations) {
    auto key = annotation_key(annotation_prefix, kAnnotationPlugin, random_id());
    if (!key) return key.error();
    std::string value;
    for (const std::string& n : names)
      value += (value.empty() ? "" : ",") + n;
    plan.annotations[*key] = value;
  }
  if (strategy.cri) plan.cdi_devices = names;
  if (!strategy.envvar) plan.envs[protocol::kEnvNvidiaVisible] = "void";
  return {};
}

}  // namespace hami::deviceplugin::cdi
