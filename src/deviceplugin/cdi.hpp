#pragma once
// The Container Device Interface (CDI) side of the device plugin, for
// NVIDIA's --device-list-strategy values cdi-annotations and cdi-cri
// (docs/cdi.md). The plugin writes one CDI spec for its GPUs, kind
// k8s.device-plugin.nvidia.com/gpu, one device per GPU named by its UUID,
// and answers Allocate with the fully qualified names of the container's
// GPUs: in a cdi.k8s.io/ annotation (cdi-annotations; containerd 1.7+,
// CRI-O, the NVIDIA runtime in CDI mode read it) and in the response's
// cdi_devices field (cdi-cri; kubelet 1.28+ hands it to the runtime). The
// per-container HAMi envs and mounts (the library, its limits file) stay
// in the response's envs and mounts either way.
//
// What the spec holds: per GPU its device node /dev/nvidia<minor>; for all
// GPUs the control nodes (/dev/nvidiactl, /dev/nvidia-uvm, ...), the
// driver's user-space libraries, their soname links and tools found under
// the driver root, NVIDIA_VISIBLE_DEVICES=void (so a legacy NVIDIA hook
// adds nothing on top), and with a hook path an update-ldcache hook.
//
//   auto strategy = cdi::parse_strategy("envvar,cdi-cri");     // Result
//   cdi::SpecInput in{.gpus = {{"GPU-a", 0}},
//                     .driver = cdi::find_driver_files("/driver-root")};
//   nlohmann::json spec = cdi::build_spec(in);
//   if (auto bad = cdi::validate_spec(spec); !bad.empty()) ...  // rule broken
//   cdi::write_spec("/var/run/cdi", spec);                      // temp + rename
//   cdi::apply_device_list(plan, *strategy, "cdi.k8s.io/");     // per container

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.hpp"
#include "deviceplugin/container_plan.hpp"

namespace hami::deviceplugin::cdi {

inline constexpr const char* kVendor = "k8s.device-plugin.nvidia.com";
inline constexpr const char* kClass = "gpu";
inline constexpr const char* kDefaultAnnotationPrefix = "cdi.k8s.io/";
inline constexpr const char* kDefaultSpecDir = "/var/run/cdi";
// NVIDIA's device plugin's --driver-root-ctr-path default: where its
// DaemonSet mounts the host's driver root.
inline constexpr const char* kDefaultDriverRootCtrPath = "/driver-root";
// The annotation key's plugin part, as NVIDIA's plugin (and upstream HAMi) name it.
inline constexpr const char* kAnnotationPlugin = "nvidia-device-plugin";

// "vendor/class", k8s.device-plugin.nvidia.com/gpu.
std::string kind();
// "vendor/class=device".
std::string qualified_name(const std::string& device);

// --device-list-strategy: a comma-separated list of envvar, cdi-annotations
// and cdi-cri. volume-mounts and unknown words are errors that say why.
struct DeviceListStrategy {
  bool envvar = false;
  bool annotations = false;
  bool cri = false;
  bool cdi() const { return annotations || cri; }
};
Result<DeviceListStrategy> parse_strategy(const std::string& list);

// The CDI naming rules (the specification's "Kind" and device name, and the
// vendor/class syntax its reference parser enforces): the reason a name
// breaks them, or nullopt.
std::optional<std::string> kind_problem(const std::string& kind);
std::optional<std::string> device_name_problem(const std::string& name);
std::optional<std::string> qualified_name_problem(const std::string& name);
// --cdi-annotation-prefix: a Kubernetes annotation key prefix, a DNS
// subdomain followed by '/', as cdi.k8s.io/.
Result<void> check_annotation_prefix(const std::string& prefix);
// prefix + "<plugin>_<id>", the key CDI's UpdateAnnotations would make; an
// Error when the name part breaks the annotation name rules (63 characters,
// alphanumeric at both ends, [-_.A-Za-z0-9] between).
Result<std::string> annotation_key(const std::string& prefix, const std::string& plugin,
                                   const std::string& id);

// What the spec is made of. Paths are absolute as the container sees them;
// on the host they lie under driver_root.
struct DriverFile {
  std::string path;    // in the container: /usr/lib/x86_64-linux-gnu/libcuda.so.1
  std::string source;  // the regular file under the root a link resolves to
  bool operator==(const DriverFile&) const = default;
};
struct DriverFiles {
  std::vector<std::string> device_nodes;  // control nodes: /dev/nvidiactl, ...
  std::vector<DriverFile> libraries;      // versioned files and their soname links
  std::vector<DriverFile> binaries;       // /usr/bin/nvidia-smi, ...
  std::vector<std::string> library_dirs;  // the directories the libraries are in
};
// Looks under `root` (the plugin's view of the driver root) for the control
// device nodes, the driver libraries CUDA and NVML need (libcuda.so.<ver>,
// libnvidia-ml.so.<ver>, ... and links to them such as libcuda.so.1) in the
// usual library directories, and the driver's tools in /usr/bin. Missing
// files are left out; an unreadable root gives empty lists.
DriverFiles find_driver_files(const std::string& root);

struct SpecGpu {
  std::string uuid;
  unsigned minor = 0;  // /dev/nvidia<minor>
};
struct SpecInput {
  std::vector<SpecGpu> gpus;
  DriverFiles driver;
  std::string driver_root = "/";  // host path: the mounts' and nodes' hostPath prefix
  std::string hook_path;          // nvidia-cdi-hook on the host; empty: no hooks
};
// The spec, cdiVersion the lowest the content needs (min_version).
nlohmann::json build_spec(const SpecInput& in);
// The lowest released CDI version whose rules admit the spec: 0.3.0, or
// 0.4.0 for a mount type, or 0.5.0 for a device node hostPath or a device
// name not starting with a letter (the rules of the reference library).
std::string min_version(const nlohmann::json& spec);
// Every rule of the specification the spec breaks, one line each; empty
// when valid: cdiVersion a released version not below min_version, kind,
// at least one device, unique valid device names, env entries VAR=value,
// absolute paths, device permissions of r/w/m, hook names of the OCI set.
std::vector<std::string> validate_spec(const nlohmann::json& spec);

// "k8s.device-plugin.nvidia.com-gpu.json", the CDI producer convention
// <vendor>-<class>.
std::string spec_file_name();
// Writes the spec into `dir` (created if missing) as a temporary file that
// no CDI reader picks up (not .json), then renames it over spec_file_name():
// a runtime reads the old spec or the new one, never half of one. Returns
// the path written.
Result<std::string> write_spec(const std::string& dir, const nlohmann::json& spec);

// The daemon's CDI settings (flags.cpp): the device list strategy, and for
// the spec where it goes and where the driver is.
struct Options {
  DeviceListStrategy strategy{.envvar = true};
  std::string annotation_prefix = kDefaultAnnotationPrefix;
  std::string spec_dir = kDefaultSpecDir;
  std::string driver_root = "/";  // on the host (--nvidia-driver-root)
  // Where the plugin sees it (--driver-root-ctr-path); when that does not
  // exist, driver_root itself is read (the plugin runs on the host, or the
  // NVIDIA runtime gave its container the driver at the host's paths).
  std::string driver_root_ctr_path = kDefaultDriverRootCtrPath;
  std::string hook_path;  // --nvidia-cdi-hook-path
};
// Finds the driver's files, builds the spec for these GPUs, checks it
// against validate_spec and writes it: the path written, or an Error that
// says which rule or which write failed.
Result<std::string> refresh_spec(const Options& o, const std::vector<SpecGpu>& gpus);

// Turns a planned container's NVIDIA_VISIBLE_DEVICES (the IDs the envvar
// strategy hands the runtime) into the strategy's answer: with cdi-annotations
// an annotation <prefix>nvidia-device-plugin_<random id> of the qualified
// names, with cdi-cri the same names in cdi_devices, and without envvar the
// variable set to void so that no NVIDIA hook adds GPUs beside CDI's.
Result<void> apply_device_list(ContainerPlan& plan, const DeviceListStrategy& strategy,
                               const std::string& annotation_prefix);

}  // namespace hami::deviceplugin::cdi
