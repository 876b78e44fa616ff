// libnvidia-ml.so.1 double: devices in physical order (NVML ignores
// CUDA_VISIBLE_DEVICES), memory as the shared simulator state has it,
// per-process usage (optionally with untranslated PIDs), utilisation from the
// engines' recorded busy time, and the scripted processes and failures of
// SIMGPU_NVML_SCRIPT, and the Xid events its `xid` lines deliver (sim_core.hpp
// describes them).
//
// Topology comes from four more kinds of script line, each about a pair of
// device indices either way round (the last line for a pair wins):
//   topology <a> <b> <internal|single|multiple|hostbridge|node|system>
//       nvmlDeviceGetTopologyCommonAncestor; default NODE for two devices on
//       the same SIMGPU_NUMA node, SYSTEM otherwise
//   nvlink <a> <b> <count>     direct NVLinks between the two
//   nvswitch <d> <count>       device d's NVLinks to NVSwitches (its far ends
//                              are a switch, not a GPU)
//   p2p <a> <b> <status>       nvmlDeviceGetP2PStatus for every capability
//                              (nvmlGpuP2PStatus_t, e.g. 1 CHIPSET_NOT_SUPPORTED);
//                              default OK, and for NVLINK: OK only when linked
// A device's links are numbered from 0: its direct links in peer index order,
// then its switch links. A device without any answers NVML_ERROR_NOT_SUPPORTED
// to the NVLink calls, as a PCIe-only GPU does. Built a second time with SIMGPU_NVML_NO_EVENTS as
// libnvidia-ml-noevents.so.1, a driver too old for the event functions.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "nvml/nvml_abi.hpp"
#include "sim_core.hpp"
#include "sim_mig.hpp"
#include "vgpu/cuda_abi.hpp"

using namespace hami::cuda;  // NOLINT

namespace {

std::atomic<int> g_refs{0};

// ---------------------------------------------------------------- the script

struct ScriptProcess {
  int device;
  unsigned pid;
  uint64_t used;
  unsigned sm;
};
struct ScriptFailure {
  std::string function;
  int device;  // -1: every device
  nvmlReturn_t rc;
};
struct ScriptXid {
  int device;
  unsigned long long xid;
  unsigned gi = 0xFFFFFFFFu;  // MIG: the GPU and compute instance it happened in
  unsigned ci = 0xFFFFFFFFu;
};
// A fact about a pair of devices (topology, nvlink, p2p lines), either way round.
struct ScriptPair {
  int a;
  int b;
  int value;
};
struct ScriptSwitch {
  int device;
  int links;
};
struct Script {
  std::vector<ScriptProcess> processes;
  std::vector<ScriptFailure> failures;
  std::vector<ScriptXid> xids;         // in file order
  std::vector<ScriptPair> levels;      // nvmlGpuTopologyLevel_t per pair
  std::vector<ScriptPair> nvlinks;     // direct NVLinks per pair
  std::vector<ScriptPair> p2p;         // nvmlGpuP2PStatus_t per pair
  std::vector<ScriptSwitch> switches;  // NVLinks to NVSwitches per device
};

bool valid_device(int d) {
  return d >= 0 && d < simgpu::kMaxDevices;
}

// The topology lines (topology, nvlink, nvswitch, p2p); false when `kind` is
// none of them or the line is malformed.
bool parse_topology_line(const std::string& kind, std::istringstream& words, Script& s) {
  if (kind == "topology") {
    static const std::pair<const char*, int> kLevels[] = {
        {"internal", NVML_TOPOLOGY_INTERNAL}, {"single", NVML_TOPOLOGY_SINGLE},
        {"multiple", NVML_TOPOLOGY_MULTIPLE}, {"hostbridge", NVML_TOPOLOGY_HOSTBRIDGE},
        {"node", NVML_TOPOLOGY_NODE},         {"system", NVML_TOPOLOGY_SYSTEM}};
    ScriptPair p{};
    std::string level;
    if (!(words >> p.a >> p.b >> level) || !valid_device(p.a) || !valid_device(p.b)) return false;
    for (const auto& [name, value] : kLevels) {
      if (level == name) {
        p.value = value;
        s.levels.push_back(p);
        return true;
      }
    }
    return false;
  }
  if (kind == "nvlink" || kind == "p2p") {
    ScriptPair p{};
    if (!(words >> p.a >> p.b >> p.value) || !valid_device(p.a) || !valid_device(p.b) ||
        p.a == p.b || p.value < 0)
      return false;
    (kind == "nvlink" ? s.nvlinks : s.p2p).push_back(p);
    return true;
  }
  if (kind == "nvswitch") {
    ScriptSwitch w{};
    if (!(words >> w.device >> w.links) || !valid_device(w.device) || w.links < 0) return false;
    s.switches.push_back(w);
    return true;
  }
  return false;
}

Script parse_script(const std::string& path) {
  Script s;
  std::ifstream in(path);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    std::istringstream words(line);
    std::string kind;
    if (!(words >> kind) || kind[0] == '#') continue;
    bool ok = false;
    if (kind == "process") {
      ScriptProcess p{};
      ok = static_cast<bool>(words >> p.device >> p.pid >> p.used >> p.sm) && p.device >= 0 &&
           p.device < simgpu::kMaxDevices;
      if (ok) s.processes.push_back(p);
    } else if (kind == "fail" || kind == "gpu_lost") {
      ScriptFailure f{{}, -1, kind == "fail" ? NVML_ERROR_UNKNOWN : NVML_ERROR_GPU_IS_LOST};
      ok = static_cast<bool>(words >> f.function);
      if (ok && !(words >> f.device)) f.device = -1;
      if (ok) s.failures.push_back(f);
    } else if (kind == "xid") {
      ScriptXid x{};
      ok = static_cast<bool>(words >> x.device >> x.xid) && x.device >= 0 &&
           x.device < simgpu::kMaxDevices;
      // A failed extraction writes 0: put "none" back.
      if (ok && !(words >> x.gi)) {
        x.gi = 0xFFFFFFFFu;
      } else if (ok && !(words >> x.ci)) {
        x.ci = 0xFFFFFFFFu;
      }
      if (ok) s.xids.push_back(x);
    } else {
      ok = parse_topology_line(kind, words, s);
    }
    if (!ok)
      std::fprintf(stderr, "simgpu: %s:%d: ignored: %s\n", path.c_str(), number, line.c_str());
  }
  return s;
}

std::mutex g_script_mu;
// How many of the script's xid lines this process has delivered (or dropped:
// the device was not registered). Guarded by g_script_mu.
size_t g_xids_taken = 0;

// The script as of now: re-read when the file's identity, size or mtime
// changed. A script with fewer xid lines than were taken sets the count back,
// so an emptied script starts the events over.
std::shared_ptr<const Script> script_locked() {
  static std::string cached_path;
  static struct stat cached_stat {};
  static bool cached_present = false;
  static const std::shared_ptr<const Script> empty = std::make_shared<Script>();
  static std::shared_ptr<const Script> cached = empty;
  const char* path = std::getenv("SIMGPU_NVML_SCRIPT");
  if (path == nullptr || *path == '\0') return empty;
  struct stat sb {};
  const bool present = ::stat(path, &sb) == 0;
  const bool same =
      cached_path == path && present == cached_present &&
      (!present ||
       (sb.st_ino == cached_stat.st_ino && sb.st_dev == cached_stat.st_dev &&
        sb.st_size == cached_stat.st_size && sb.st_mtim.tv_sec == cached_stat.st_mtim.tv_sec &&
        sb.st_mtim.tv_nsec == cached_stat.st_mtim.tv_nsec));
  if (!same) {
    cached = present ? std::make_shared<Script>(parse_script(path)) : empty;
    cached_path = path;
    cached_stat = sb;
    cached_present = present;
    g_xids_taken = std::min(g_xids_taken, cached->xids.size());
  }
  return cached;
}

std::shared_ptr<const Script> script() {
  std::lock_guard lock(g_script_mu);
  return script_locked();
}

// The next xid line not yet taken, taking it; false when there is none.
[[maybe_unused]] bool take_xid(ScriptXid* out) {
  std::lock_guard lock(g_script_mu);
  const auto s = script_locked();
  if (g_xids_taken >= s->xids.size()) return false;
  *out = s->xids[g_xids_taken++];
  return true;
}

// What the script says `fn` returns on `dev` (-1: not a device call).
nvmlReturn_t scripted_failure(const char* fn, int dev) {
  const auto s = script();
  for (const ScriptFailure& f : s->failures) {
    if (f.function == fn && (f.device < 0 || f.device == dev)) return f.rc;
  }
  return NVML_SUCCESS;
}

// ---------------------------------------------------------------- devices

simgpu::Device* device(nvmlDevice_t h) {
  auto* d = reinterpret_cast<simgpu::Device*>(h);
  simgpu::State& st = simgpu::state();
  if (d < st.devices || d >= st.devices + st.device_count) return nullptr;
  return d;
}

int index_of(const simgpu::Device* d) {
  return static_cast<int>(d - simgpu::state().devices);
}

// A live compute instance's slot in `gpu`'s Mig::cis, from the address that
// is its nvmlComputeInstance_t and its MIG device's nvmlDevice_t.
bool ci_slot(const void* h, int* gpu, int* slot) {
  simgpu::State& st = simgpu::state();
  for (uint32_t g = 0; g < st.device_count; ++g) {
    const simgpu::MigCi* c = st.mig[g].cis;
    if (h >= c && h < c + simgpu::kMaxCis) {
      *gpu = static_cast<int>(g);
      *slot = static_cast<int>(static_cast<const simgpu::MigCi*>(h) - c);
      return c[*slot].id >= 0 && simgpu::mig::enabled(*gpu);
    }
  }
  return false;
}

// The device id (sim_core.hpp) of a MIG device handle, or -1.
int mig_handle(nvmlDevice_t h) {
  int gpu = 0;
  int slot = 0;
  return ci_slot(h, &gpu, &slot) ? simgpu::mig_device(gpu, slot) : -1;
}

nvmlReturn_t ready() {
  if (simgpu::should_fail("nvml")) return NVML_ERROR_UNKNOWN;
  return g_refs.load() > 0 ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
}

// The checks every call makes: initialised, not failing by SIMGPU_FAIL or the script.
nvmlReturn_t enter(const char* fn) {
  if (nvmlReturn_t rc = ready(); rc != NVML_SUCCESS) return rc;
  return scripted_failure(fn, -1);
}
// The same for a call on GPU `h`, which must be valid. A MIG device handle
// is NVML_ERROR_NOT_SUPPORTED: only the calls that take enter_any answer
// one (NVML's "with some restrictions").
nvmlReturn_t enter(const char* fn, nvmlDevice_t h, simgpu::Device** out) {
  if (nvmlReturn_t rc = ready(); rc != NVML_SUCCESS) return rc;
  *out = device(h);
  if (*out == nullptr)
    return mig_handle(h) >= 0 ? NVML_ERROR_NOT_SUPPORTED : NVML_ERROR_INVALID_ARGUMENT;
  return scripted_failure(fn, index_of(*out));
}
// The same for a call that takes a GPU or a MIG device: its device id.
nvmlReturn_t enter_any(const char* fn, nvmlDevice_t h, int* dev) {
  if (nvmlReturn_t rc = ready(); rc != NVML_SUCCESS) return rc;
  const simgpu::Device* d = device(h);
  *dev = d != nullptr ? index_of(d) : mig_handle(h);
  if (*dev < 0) return NVML_ERROR_INVALID_ARGUMENT;
  return scripted_failure(fn, simgpu::gpu_of(*dev));
}

// ---------------------------------------------------------------- processes

struct ProcessUse {
  unsigned pid;
  uint64_t used;
  unsigned gi = 0xFFFFFFFF;  // MIG: where the memory is
  unsigned ci = 0xFFFFFFFF;
};

// Live simulated processes using memory on device id `dev`, then the
// script's. On a GPU, a process has one entry for its memory outside MIG
// devices and one per MIG device it uses (with its GI and CI IDs); on a MIG
// device, the one entry for it.
std::vector<ProcessUse> processes_on(int dev) {
  std::vector<ProcessUse> out;
  const int gpu = simgpu::gpu_of(dev);
  const simgpu::Mig& m = simgpu::state().mig[gpu];
  for (simgpu::Proc& p : simgpu::state().procs) {
    const int32_t pid = p.pid.load();
    if (pid <= 0) continue;
    const auto shown = static_cast<unsigned>(pid + simgpu::nvml_pid_offset());
    uint64_t outside = p.used[gpu].load();
    for (int c = 0; c < simgpu::kMaxCis; ++c) {
      const uint64_t used = p.mig_used[gpu][c].load();
      outside -= std::min(outside, used);
      if (used == 0 || (simgpu::is_mig_device(dev) && dev != simgpu::mig_device(gpu, c))) continue;
      out.push_back({shown, used, static_cast<unsigned>(m.gis[m.cis[c].gi].id),
                     static_cast<unsigned>(m.cis[c].id)});
    }
    if (outside != 0 && !simgpu::is_mig_device(dev)) out.push_back({shown, outside});
  }
  if (simgpu::is_mig_device(dev)) return out;
  const auto s = script();
  for (const ScriptProcess& sp : s->processes) {
    if (sp.device == dev) out.push_back({sp.pid, sp.used});
  }
  return out;
}

void fill_pci(unsigned bus, unsigned device_id, nvmlPciInfo_t* pci) {
  *pci = nvmlPciInfo_t{};
  pci->domain = 0;
  pci->bus = bus & 0xFFu;
  pci->device = 0;
  pci->pciDeviceId = device_id;
  pci->pciSubSystemId = 0x16c110de;
  std::snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.0", 0u, pci->bus & 0xFFu,
                0u);
  std::snprintf(pci->busId, sizeof pci->busId, "%08X:%02X:%02X.0", 0u, pci->bus & 0xFFu, 0u);
}

uint64_t scripted_used(int dev) {
  uint64_t sum = 0;
  const auto s = script();
  for (const ScriptProcess& sp : s->processes) {
    if (sp.device == dev) sum += sp.used;
  }
  return sum;
}

template <class Info>
nvmlReturn_t running_processes(const char* fn, nvmlDevice_t h, unsigned int* count, Info* infos) {
  int dev = 0;
  if (nvmlReturn_t rc = enter_any(fn, h, &dev); rc != NVML_SUCCESS) return rc;
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const std::vector<ProcessUse> procs = processes_on(dev);
  const auto n = static_cast<unsigned>(procs.size());
  for (unsigned i = 0; infos != nullptr && i < n && i < *count; ++i) {
    if constexpr (std::is_same_v<Info, nvmlProcessInfo_v1_t>) {
      infos[i] = Info{procs[i].pid, procs[i].used};
    } else {
      infos[i] = Info{procs[i].pid, procs[i].used, procs[i].gi, procs[i].ci};
    }
  }
  const bool fits = n <= *count;
  *count = n;
  return fits ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE;
}

// ---------------------------------------------------------------- utilisation

constexpr int64_t kSecondNs = 1'000'000'000;
// How far back process utilisation looks at most: the busy history's reach.
constexpr int64_t kMaxWindowNs = 2 * kSecondNs;

// Busy time as a percentage of `window`, at least 1 when anything ran.
unsigned percent(uint64_t busy, int64_t window) {
  if (busy == 0 || window <= 0) return 0;
  const uint64_t w = static_cast<uint64_t>(window);
  const uint64_t p = (busy * 100 + w / 2) / w;
  return static_cast<unsigned>(std::clamp<uint64_t>(p, 1, 100));
}

}  // namespace

extern "C" {

nvmlReturn_t nvmlInit_v2() {
  if (simgpu::should_fail("nvmlInit_v2")) return NVML_ERROR_UNKNOWN;
  if (nvmlReturn_t rc = scripted_failure("nvmlInit_v2", -1); rc != NVML_SUCCESS) return rc;
  simgpu::state();
  ++g_refs;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlInit() {
  return nvmlInit_v2();
}
nvmlReturn_t nvmlInitWithFlags(unsigned int) {
  return nvmlInit_v2();
}

nvmlReturn_t nvmlShutdown() {
  if (g_refs.load() == 0) return NVML_ERROR_UNINITIALIZED;
  --g_refs;
  return NVML_SUCCESS;
}

const char* nvmlErrorString(nvmlReturn_t rc) {
  switch (rc) {
    case NVML_SUCCESS:
      return "Success";
    case NVML_ERROR_UNINITIALIZED:
      return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
      return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
      return "Not Supported";
    case NVML_ERROR_NOT_FOUND:
      return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE:
      return "Insufficient Size";
    case NVML_ERROR_GPU_IS_LOST:
      return "GPU is lost";
    case NVML_ERROR_NO_PERMISSION:
      return "Insufficient Permissions";
    case NVML_ERROR_IN_USE:
      return "In use by another client";
    case NVML_ERROR_INSUFFICIENT_RESOURCES:
      return "Insufficient resources";
    default:
      return "Unknown Error";
  }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  if (nvmlReturn_t rc = enter("nvmlSystemGetDriverVersion"); rc != NVML_SUCCESS) return rc;
  if (version == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const char* v = std::getenv("SIMGPU_DRIVER_VERSION");
  if (v == nullptr || *v == '\0') v = "550.127.05";
  if (std::strlen(v) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::snprintf(version, length, "%s", v);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  if (nvmlReturn_t rc = enter("nvmlDeviceGetCount_v2"); rc != NVML_SUCCESS) return rc;
  *count = simgpu::state().device_count;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* h) {
  if (nvmlReturn_t rc = ready(); rc != NVML_SUCCESS) return rc;
  if (index >= simgpu::state().device_count) return NVML_ERROR_INVALID_ARGUMENT;
  if (nvmlReturn_t rc = scripted_failure("nvmlDeviceGetHandleByIndex_v2", static_cast<int>(index));
      rc != NVML_SUCCESS)
    return rc;
  *h = reinterpret_cast<nvmlDevice_t>(&simgpu::state().devices[index]);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* h) {
  if (nvmlReturn_t rc = enter("nvmlDeviceGetHandleByUUID"); rc != NVML_SUCCESS) return rc;
  simgpu::State& st = simgpu::state();
  for (uint32_t i = 0; i < st.device_count; ++i) {
    if (std::strcmp(st.devices[i].uuid, uuid) == 0) {
      *h = reinterpret_cast<nvmlDevice_t>(&st.devices[i]);
      return NVML_SUCCESS;
    }
  }
  if (const int dev = simgpu::mig::find_mig_device(uuid); dev >= 0) {
    const int gpu = simgpu::gpu_of(dev);
    *h = reinterpret_cast<nvmlDevice_t>(&st.mig[gpu].cis[dev - simgpu::mig_device(gpu, 0)]);
    return NVML_SUCCESS;
  }
  return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t h, char* uuid, unsigned int length) {
  int dev = 0;
  if (nvmlReturn_t rc = enter_any("nvmlDeviceGetUUID", h, &dev); rc != NVML_SUCCESS) return rc;
  const char* id = simgpu::is_mig_device(dev) ? reinterpret_cast<simgpu::MigCi*>(h)->uuid
                                              : simgpu::state().devices[dev].uuid;
  if (uuid == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (std::strlen(id) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::snprintf(uuid, length, "%s", id);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t h, unsigned int* index) {
  simgpu::Device* d = nullptr;
  if (nvmlReturn_t rc = enter("nvmlDeviceGetIndex", h, &d); rc != NVML_SUCCESS) return rc;
  *index = static_cast<unsigned>(index_of(d));
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t h, unsigned int* minor) {
  simgpu::Device* d = nullptr;
  if (nvmlReturn_t rc = enter("nvmlDeviceGetMinorNumber", h, &d); rc != NVML_SUCCESS) return rc;
  if (minor == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *minor = static_cast<unsigned>(index_of(d));  // /dev/nvidia<minor>
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t h, char* name, unsigned int length) {
  int dev = 0;
  if (nvmlReturn_t rc = enter_any("nvmlDeviceGetName", h, &dev); rc != NVML_SUCCESS) return rc;
  std::snprintf(name, length, "%s", simgpu::mig::device_name(dev).c_str());
  return NVML_SUCCESS;
}

// Device i sits on bus 0x10 + i, as an H100 (device id 0x2330, NVIDIA 0x10de).
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t h, nvmlPciInfo_t* pci) {
  simgpu::Device* d = nullptr;
  if (nvmlReturn_t rc = enter("nvmlDeviceGetPciInfo_v3", h, &d); rc != NVML_SUCCESS) return rc;
  if (pci == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  fill_pci(0x10 + static_cast<unsigned>(index_of(d)), 0x233010de, pci);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t h, unsigned int* node) {
  simgpu::Device* d = nullptr;
  if (nvmlReturn_t rc = enter("nvmlDeviceGetNumaNodeId", h, &d); rc != NVML_SUCCESS) return rc;
  if (node == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (d->numa_node < 0) return NVML_ERROR_NOT_SUPPORTED;
  *node = static_cast<unsigned>(d->numa_node);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t h, int* major, int* minor) {
  int dev = 0;
  if (nvmlReturn_t rc = enter_any("nvmlDeviceGetCudaComputeCapability", h, &dev);
      rc != NVML_SUCCESS)
    return rc;
  if (major == nullptr || minor == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const simgpu::Device* d = &simgpu::state().devices[simgpu::gpu_of(dev)];
  *major = d->cc_major;
  *minor = d->cc_minor;
  return NVML_SUCCESS;
}

// SIMGPU_COMPUTE_MODE=<mode>[,<mode>...]: nvmlComputeMode_t per device
// index (0 DEFAULT, 1 EXCLUSIVE_THREAD, 2 PROHIBITED, 3 EXCLUSIVE_PROCESS);
// DEFAULT for devices it does not name. Read at every call.
nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t h, int* mode) {
  simgpu::Device* d = nullptr;
  if (nvmlReturn_t rc = enter("nvmlDeviceGetComputeMode", h, &d); rc != NVML_SUCCESS) return rc;
  if (mode == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *mode = 0;
  const char* spec = std::getenv("SIMGPU_COMPUTE_MODE");
  const int index = index_of(d);
  for (int i = 0; spec != nullptr && *spec != '\0'; ++i) {
    if (i == index) {
      *mode = std::atoi(spec);
      break;
    }
    spec = std::strchr(spec, ',');
    if (spec != nullptr) ++spec;
  }
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t h, nvmlMemory_t* m) {
  int dev = 0;
  if (nvmlReturn_t rc = enter_any("nvmlDeviceGetMemoryInfo", h, &dev); rc != NVML_SUCCESS)
    return rc;
  if (m == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  m->total = simgpu::device_total(dev);
  m->used = std::min<uint64_t>(m->total, simgpu::device_used(dev) + scripted_used(dev));
  m->free = m->total - m->used;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t h, nvmlMemory_v2_t* m) {
  int dev = 0;
  if (nvmlReturn_t rc = enter_any("nvmlDeviceGetMemoryInfo_v2", h, &dev); rc != NVML_SUCCESS)
    return rc;
  if (m == nullptr || m->version != nvmlMemory_v2) return NVML_ERROR_INVALID_ARGUMENT;
  m->total = simgpu::device_total(dev);
  m->reserved = 0;
  m->used = std::min<uint64_t>(m->total, simgpu::device_used(dev) + scripted_used(dev));
  m->free = m->total - m->used;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t h, unsigned int* count,
                                                     nvmlProcessInfo_t* infos) {
  return running_processes("nvmlDeviceGetComputeRunningProcesses_v3", h, count, infos);
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t h, unsigned int* count,
                                                     nvmlProcessInfo_t* infos) {
  return running_processes("nvmlDeviceGetComputeRunningProcesses_v2", h, count, infos);
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t h, unsigned int* count,
                                                  nvmlProcessInfo_v1_t* infos) {
  return running_processes("nvmlDeviceGetComputeRunningProcesses", h, count, infos);
}

// No graphics on a simulated GPU.
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t h, unsigned int* count,
                                                      nvmlProcessInfo_t*) {
  simgpu::Device* d = nullptr;
  if (nvmlReturn_t rc = enter("nvmlDeviceGetGraphicsRunningProcesses_v3", h, &d);
      rc != NVML_SUCCESS)
    return rc;
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *count = 0;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t h, nvmlUtilization_t* u) {
  simgpu::Device* d = nullptr;
  if (nvmlReturn_t rc = enter("nvmlDeviceGetUtilizationRates", h, &d); rc != NVML_SUCCESS)
    return rc;
  if (u == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const int dev = index_of(d);
  const int64_t now = simgpu::realtime_ns();
  unsigned sum = 0;
  for (const simgpu::Proc& p : simgpu::state().procs) {
    if (p.pid.load() > 0) sum += percent(simgpu::busy_ns(p, dev, now - kSecondNs, now), kSecondNs);
  }
  const auto s = script();
  for (const ScriptProcess& sp : s->processes) {
    if (sp.device == dev) sum += sp.sm;
  }
  u->gpu = std::min(sum, 100u);
  u->memory = 0;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t h,
                                             nvmlProcessUtilizationSample_t* samples,
                                             unsigned int* count, unsigned long long last_seen_us) {
  simgpu::Device* d = nullptr;
  if (nvmlReturn_t rc = enter("nvmlDeviceGetProcessUtilization", h, &d); rc != NVML_SUCCESS)
    return rc;
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const int dev = index_of(d);
  const int64_t now = simgpu::realtime_ns();
  const auto now_us = static_cast<unsigned long long>(now / 1000);
  std::vector<nvmlProcessUtilizationSample_t> out;
  if (last_seen_us < now_us) {
    const int64_t from =
        last_seen_us == 0 ? now - kSecondNs
                          : std::max(now - kMaxWindowNs, static_cast<int64_t>(last_seen_us) * 1000);
    for (const simgpu::Proc& p : simgpu::state().procs) {
      const int32_t pid = p.pid.load();
      const unsigned sm = pid > 0 ? percent(simgpu::busy_ns(p, dev, from, now), now - from) : 0;
      if (sm == 0) continue;
      out.push_back({static_cast<unsigned>(pid + simgpu::nvml_pid_offset()), now_us, sm, 0, 0, 0});
    }
    const auto s = script();
    for (const ScriptProcess& sp : s->processes) {
      if (sp.device == dev && sp.sm > 0)
        out.push_back({sp.pid, now_us, std::min(sp.sm, 100u), 0, 0, 0});
    }
  }
  if (out.empty()) return NVML_ERROR_NOT_FOUND;
  const auto n = static_cast<unsigned>(out.size());
  if (samples == nullptr || *count < n) {
    *count = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  std::copy(out.begin(), out.end(), samples);
  *count = n;
  return NVML_SUCCESS;
}

}  // extern "C"

// ---------------------------------------------------------------- topology

namespace {

// What the script says about the pair (a, b), either way round; `fallback`
// when it says nothing (the last line wins).
int pair_value(const std::vector<ScriptPair>& lines, int a, int b, int fallback) {
  int v = fallback;
  for (const ScriptPair& p : lines) {
    if ((p.a == a && p.b == b) || (p.a == b && p.b == a)) v = p.value;
  }
  return v;
}

int switch_links(const Script& s, int dev) {
  int n = 0;
  for (const ScriptSwitch& w : s.switches) {
    if (w.device == dev) n = w.links;
  }
  return n;
}

// One enabled link: its far end is GPU `peer`, or an NVSwitch when peer < 0.
struct SimLink {
  int peer;
};

// Device `dev`'s links, numbered from 0: its direct links to each other
// device in index order, then its NVSwitch links; at most NVML_NVLINK_MAX_LINKS.
std::vector<SimLink> links_of(const Script& s, int dev) {
  std::vector<SimLink> out;
  const int n = static_cast<int>(simgpu::state().device_count);
  for (int peer = 0; peer < n; ++peer) {
    if (peer == dev) continue;
    for (int k = pair_value(s.nvlinks, dev, peer, 0); k > 0; --k)
      out.push_back({peer});
  }
  for (int k = switch_links(s, dev); k > 0; --k)
    out.push_back({-1});
  if (out.size() > NVML_NVLINK_MAX_LINKS) out.resize(NVML_NVLINK_MAX_LINKS);
  return out;
}

// Devices on one known NUMA node share it; otherwise the path crosses the
// SMP interconnect.
int default_level(int a, int b) {
  const simgpu::State& st = simgpu::state();
  const int na = st.devices[a].numa_node;
  const int nb = st.devices[b].numa_node;
  return na == nb ? NVML_TOPOLOGY_NODE : NVML_TOPOLOGY_SYSTEM;
}

bool nvlinked(const Script& s, int a, int b) {
  return pair_value(s.nvlinks, a, b, 0) > 0 || (switch_links(s, a) > 0 && switch_links(s, b) > 0);
}

// The link `link` of `dev`, or an NVML error: NOT_SUPPORTED on a device
// without NVLink, INVALID_ARGUMENT past the last link number.
nvmlReturn_t find_link(const char* fn, nvmlDevice_t h, unsigned link, int* dev,
                       std::vector<SimLink>* links) {
  simgpu::Device* d = nullptr;
  if (nvmlReturn_t rc = enter(fn, h, &d); rc != NVML_SUCCESS) return rc;
  *dev = index_of(d);
  *links = links_of(*script(), *dev);
  if (links->empty()) return NVML_ERROR_NOT_SUPPORTED;
  if (link >= NVML_NVLINK_MAX_LINKS) return NVML_ERROR_INVALID_ARGUMENT;
  return NVML_SUCCESS;
}

}  // namespace

extern "C" {

nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t h1, nvmlDevice_t h2, int* level) {
  simgpu::Device* a = nullptr;
  if (nvmlReturn_t rc = enter("nvmlDeviceGetTopologyCommonAncestor", h1, &a); rc != NVML_SUCCESS)
    return rc;
  simgpu::Device* b = device(h2);
  if (b == nullptr || level == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const int ia = index_of(a);
  const int ib = index_of(b);
  *level = ia == ib ? NVML_TOPOLOGY_INTERNAL
                    : pair_value(script()->levels, ia, ib, default_level(ia, ib));
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t h1, nvmlDevice_t h2, int caps, int* status) {
  simgpu::Device* a = nullptr;
  if (nvmlReturn_t rc = enter("nvmlDeviceGetP2PStatus", h1, &a); rc != NVML_SUCCESS) return rc;
  simgpu::Device* b = device(h2);
  if (b == nullptr || status == nullptr || caps < NVML_P2P_CAPS_INDEX_READ ||
      caps > NVML_P2P_CAPS_INDEX_PCI)
    return NVML_ERROR_INVALID_ARGUMENT;
  const auto s = script();
  const int ia = index_of(a);
  const int ib = index_of(b);
  int fallback = NVML_P2P_STATUS_OK;
  if (caps == NVML_P2P_CAPS_INDEX_NVLINK && !nvlinked(*s, ia, ib))
    fallback = NVML_P2P_STATUS_NOT_SUPPORTED;
  *status = pair_value(s->p2p, ia, ib, fallback);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t h, unsigned int link, int* active) {
  int dev = 0;
  std::vector<SimLink> links;
  if (nvmlReturn_t rc = find_link("nvmlDeviceGetNvLinkState", h, link, &dev, &links);
      rc != NVML_SUCCESS)
    return rc;
  if (active == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *active = link < links.size() ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  return NVML_SUCCESS;
}

// A GPU's far end is that GPU's PCI function; every NVSwitch link of device
// d ends at one switch, bus 0xC0 + d / 4 (as an HGX board has four).
nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t h, unsigned int link,
                                                 nvmlPciInfo_t* pci) {
  int dev = 0;
  std::vector<SimLink> links;
  if (nvmlReturn_t rc = find_link("nvmlDeviceGetNvLinkRemotePciInfo_v2", h, link, &dev, &links);
      rc != NVML_SUCCESS)
    return rc;
  if (pci == nullptr || link >= links.size()) return NVML_ERROR_INVALID_ARGUMENT;
  const int peer = links[link].peer;
  if (peer >= 0) {
    fill_pci(0x10 + static_cast<unsigned>(peer), 0x233010de, pci);
  } else {
    fill_pci(0xC0 + static_cast<unsigned>(dev) / 4, 0x22a310de, pci);
  }
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t h, unsigned int link, int* type) {
  int dev = 0;
  std::vector<SimLink> links;
  if (nvmlReturn_t rc = find_link("nvmlDeviceGetNvLinkRemoteDeviceType", h, link, &dev, &links);
      rc != NVML_SUCCESS)
    return rc;
  if (type == nullptr || link >= links.size()) return NVML_ERROR_INVALID_ARGUMENT;
  *type = links[link].peer >= 0 ? NVML_NVLINK_DEVICE_TYPE_GPU : NVML_NVLINK_DEVICE_TYPE_SWITCH;
  return NVML_SUCCESS;
}

}  // extern "C"

// ---------------------------------------------------------------- MIG

namespace {

namespace mig = simgpu::mig;

// A live GPU instance's GPU and slot from its nvmlGpuInstance_t.
bool gi_slot(nvmlGpuInstance_t h, int* gpu, int* slot) {
  simgpu::State& st = simgpu::state();
  const void* p = h;
  for (uint32_t g = 0; g < st.device_count; ++g) {
    const simgpu::MigGi* gis = st.mig[g].gis;
    if (p >= gis && p < gis + simgpu::kMaxGis) {
      *gpu = static_cast<int>(g);
      *slot = static_cast<int>(static_cast<const simgpu::MigGi*>(p) - gis);
      return gis[*slot].id >= 0 && mig::enabled(*gpu);
    }
  }
  return false;
}

nvmlGpuInstance_t gi_handle(int gpu, int slot) {
  return reinterpret_cast<nvmlGpuInstance_t>(&simgpu::state().mig[gpu].gis[slot]);
}
nvmlComputeInstance_t ci_handle(int gpu, int slot) {
  return reinterpret_cast<nvmlComputeInstance_t>(&simgpu::state().mig[gpu].cis[slot]);
}
nvmlDevice_t gpu_handle(int gpu) {
  return reinterpret_cast<nvmlDevice_t>(&simgpu::state().devices[gpu]);
}

// The checks of a call on a GPU instance.
nvmlReturn_t enter_gi(const char* fn, nvmlGpuInstance_t h, int* gpu, int* slot) {
  if (nvmlReturn_t rc = ready(); rc != NVML_SUCCESS) return rc;
  if (!gi_slot(h, gpu, slot)) return NVML_ERROR_INVALID_ARGUMENT;
  return scripted_failure(fn, *gpu);
}
nvmlReturn_t enter_ci(const char* fn, nvmlComputeInstance_t h, int* gpu, int* slot) {
  if (nvmlReturn_t rc = ready(); rc != NVML_SUCCESS) return rc;
  if (!ci_slot(h, gpu, slot)) return NVML_ERROR_INVALID_ARGUMENT;
  return scripted_failure(fn, *gpu);
}

template <class Info>
void fill_gi_profile(const mig::GiProfile& p, Info* info) {
  info->id = p.id;
  if constexpr (!std::is_same_v<Info, nvmlGpuInstanceProfileInfo_v3_t>) info->isP2pSupported = 0;
  info->sliceCount = p.slices;
  info->instanceCount = p.instances;
  info->multiprocessorCount = p.sms;
  info->copyEngineCount = p.copy_engines;
  info->decoderCount = p.decoders;
  info->encoderCount = p.encoders;
  info->jpegCount = p.jpegs;
  info->ofaCount = p.ofas;
  info->memorySizeMB = p.memory_mib;
  if constexpr (!std::is_same_v<Info, nvmlGpuInstanceProfileInfo_t>)
    std::snprintf(info->name, sizeof info->name, "MIG %s", p.name);
  if constexpr (std::is_same_v<Info, nvmlGpuInstanceProfileInfo_v3_t>) info->capabilities = 0;
}

// The info calls: NOT_SUPPORTED on a GPU without MIG or with MIG off (as
// nvml.h says of the V call; the GPU probe, tests/gpu/mig_probe.cpp, records
// what a real driver does with MIG off), and for a profile it does not have.
nvmlReturn_t find_gi_profile(const char* fn, nvmlDevice_t h, unsigned profile, const void* info,
                             const mig::GiProfile** out) {
  simgpu::Device* d = nullptr;
  if (nvmlReturn_t rc = enter(fn, h, &d); rc != NVML_SUCCESS) return rc;
  if (info == nullptr || profile >= NVML_GPU_INSTANCE_PROFILE_COUNT)
    return NVML_ERROR_INVALID_ARGUMENT;
  // A MIG-capable GPU describes its profiles with MIG off too (driver 580 on
  // an H200: tests/gpu/results/mig-probe-h200.txt).
  *out = mig::gi_profile(index_of(d), profile);
  return *out != nullptr ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
}

template <class Info>
void fill_ci_profile(const mig::GiProfile& gi, const mig::CiProfile& p, Info* info) {
  info->id = p.profile;
  info->sliceCount = p.slices;
  info->instanceCount = p.instances;
  info->multiprocessorCount = p.sms;
  info->sharedCopyEngineCount = gi.copy_engines;
  info->sharedDecoderCount = gi.decoders;
  info->sharedEncoderCount = gi.encoders;
  info->sharedJpegCount = gi.jpegs;
  info->sharedOfaCount = gi.ofas;
  if constexpr (!std::is_same_v<Info, nvmlComputeInstanceProfileInfo_t>)
    std::snprintf(info->name, sizeof info->name, "MIG %s", p.name.c_str());
  if constexpr (std::is_same_v<Info, nvmlComputeInstanceProfileInfo_v3_t>) info->capabilities = 0;
}

// A call about one CI profile of a GPU instance: where the GI is, its
// profile and the CI profile.
struct CiCall {
  int gpu = 0;
  int slot = 0;
  const mig::GiProfile* gi = nullptr;
  mig::CiProfile profile;
};

// CI profile `profile` of GPU instance `h`: INVALID_ARGUMENT when `out_arg`
// is null, past the profile constants or for another engine profile,
// NOT_SUPPORTED when the GI has no such CI.
nvmlReturn_t find_ci_profile(const char* fn, nvmlGpuInstance_t h, unsigned profile,
                             const void* out_arg, CiCall* c,
                             unsigned eng_profile = NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED) {
  if (nvmlReturn_t rc = enter_gi(fn, h, &c->gpu, &c->slot); rc != NVML_SUCCESS) return rc;
  if (out_arg == nullptr || profile >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT ||
      eng_profile != NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
    return NVML_ERROR_INVALID_ARGUMENT;
  c->gi = mig::gi_profile(c->gpu, simgpu::state().mig[c->gpu].gis[c->slot].profile);
  return mig::ci_profile(*c->gi, profile, &c->profile) ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
}

// Placements as the PossiblePlacements calls answer them: the count alone
// when `out` is null, INSUFFICIENT_SIZE when *count is short of them.
template <class Placement>
nvmlReturn_t answer_placements(const std::vector<Placement>& all, Placement* out, unsigned* count) {
  const auto n = static_cast<unsigned>(all.size());
  if (out != nullptr && *count < n) {
    *count = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  if (out != nullptr) std::copy(all.begin(), all.end(), out);
  *count = n;
  return NVML_SUCCESS;
}

// The live slots `keep` picks, in ID order (the list calls' order).
template <class Slot, class Keep>
std::vector<int> by_id(const Slot* slots, int n, Keep keep) {
  std::vector<int> picked;
  for (int i = 0; i < n; ++i) {
    if (slots[i].id >= 0 && keep(slots[i])) picked.push_back(i);
  }
  std::sort(picked.begin(), picked.end(), [&](int a, int b) { return slots[a].id < slots[b].id; });
  return picked;
}

// A MIG-enabled GPU (or, `off_too`, a MIG-capable one with MIG off, as the
// real driver answers capacity queries) and the GI profile of ID `id` on it.
nvmlReturn_t enter_gi_profile(const char* fn, nvmlDevice_t h, unsigned id, int* gpu,
                              const mig::GiProfile** p, bool off_too = false) {
  simgpu::Device* d = nullptr;
  if (nvmlReturn_t rc = enter(fn, h, &d); rc != NVML_SUCCESS) return rc;
  *gpu = index_of(d);
  if (!(off_too ? mig::capable(*gpu) : mig::enabled(*gpu))) return NVML_ERROR_NOT_SUPPORTED;
  *p = mig::gi_profile_by_id(*gpu, id);
  return *p != nullptr ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

// The IDs of a MIG device's GI and CI; NOT_SUPPORTED on a GPU handle.
nvmlReturn_t mig_ids(const char* fn, nvmlDevice_t h, unsigned* gi, unsigned* ci) {
  int dev = 0;
  if (nvmlReturn_t rc = enter_any(fn, h, &dev); rc != NVML_SUCCESS) return rc;
  if (gi == nullptr && ci == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!simgpu::is_mig_device(dev)) return NVML_ERROR_NOT_SUPPORTED;
  const simgpu::Mig& m = simgpu::state().mig[simgpu::gpu_of(dev)];
  const simgpu::MigCi& c = m.cis[dev - simgpu::mig_device(simgpu::gpu_of(dev), 0)];
  if (gi != nullptr) *gi = static_cast<unsigned>(m.gis[c.gi].id);
  if (ci != nullptr) *ci = static_cast<unsigned>(c.id);
  return NVML_SUCCESS;
}

}  // namespace

extern "C" {

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t h, unsigned int* current, unsigned int* pending) {
  simgpu::Device* d = nullptr;
  if (nvmlReturn_t rc = enter("nvmlDeviceGetMigMode", h, &d); rc != NVML_SUCCESS) return rc;
  if (current == nullptr || pending == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!mig::capable(index_of(d))) return NVML_ERROR_NOT_SUPPORTED;
  *current = simgpu::state().mig[index_of(d)].mode;
  *pending = simgpu::state().mig[index_of(d)].pending;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceSetMigMode(nvmlDevice_t h, unsigned int mode, nvmlReturn_t* activation) {
  simgpu::Device* d = nullptr;
  if (nvmlReturn_t rc = enter("nvmlDeviceSetMigMode", h, &d); rc != NVML_SUCCESS) return rc;
  if (activation == nullptr || mode > NVML_DEVICE_MIG_ENABLE) return NVML_ERROR_INVALID_ARGUMENT;
  if (!mig::capable(index_of(d))) return NVML_ERROR_NOT_SUPPORTED;
  return mig::set_mode(index_of(d), mode, activation);
}

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t h, unsigned int profile,
                                                 nvmlGpuInstanceProfileInfo_t* info) {
  const mig::GiProfile* p = nullptr;
  if (nvmlReturn_t rc =
          find_gi_profile("nvmlDeviceGetGpuInstanceProfileInfo", h, profile, info, &p);
      rc != NVML_SUCCESS)
    return rc;
  fill_gi_profile(*p, info);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(nvmlDevice_t h, unsigned int profile,
                                                  nvmlGpuInstanceProfileInfo_v2_t* info) {
  const mig::GiProfile* p = nullptr;
  if (nvmlReturn_t rc =
          find_gi_profile("nvmlDeviceGetGpuInstanceProfileInfoV", h, profile, info, &p);
      rc != NVML_SUCCESS)
    return rc;
  if (info->version == nvmlGpuInstanceProfileInfo_v3) {
    fill_gi_profile(*p, reinterpret_cast<nvmlGpuInstanceProfileInfo_v3_t*>(info));
  } else if (info->version == nvmlGpuInstanceProfileInfo_v2) {
    fill_gi_profile(*p, info);
  } else {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  return NVML_SUCCESS;
}

// Every placement the profile has, MIG on or off (nvml.h).
nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements_v2(nvmlDevice_t h, unsigned int id,
                                                           nvmlGpuInstancePlacement_t* placements,
                                                           unsigned int* count) {
  simgpu::Device* d = nullptr;
  if (nvmlReturn_t rc = enter("nvmlDeviceGetGpuInstancePossiblePlacements_v2", h, &d);
      rc != NVML_SUCCESS)
    return rc;
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const mig::GiProfile* p = mig::gi_profile_by_id(index_of(d), id);
  if (p == nullptr) return NVML_ERROR_NOT_SUPPORTED;
  std::vector<nvmlGpuInstancePlacement_t> all;
  for (unsigned start : p->starts)
    all.push_back({start, p->placement_size});
  return answer_placements(all, placements, count);
}

nvmlReturn_t nvmlDeviceGetGpuInstanceRemainingCapacity(nvmlDevice_t h, unsigned int id,
                                                       unsigned int* count) {
  int gpu = 0;
  const mig::GiProfile* p = nullptr;
  if (nvmlReturn_t rc =
          enter_gi_profile("nvmlDeviceGetGpuInstanceRemainingCapacity", h, id, &gpu, &p, true);
      rc != NVML_SUCCESS)
    return rc;
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *count = mig::gi_remaining(gpu, *p);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceCreateGpuInstance(nvmlDevice_t h, unsigned int id, nvmlGpuInstance_t* gi) {
  int gpu = 0;
  const mig::GiProfile* p = nullptr;
  if (nvmlReturn_t rc = enter_gi_profile("nvmlDeviceCreateGpuInstance", h, id, &gpu, &p);
      rc != NVML_SUCCESS)
    return rc;
  if (gi == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  int slot = -1;
  if (nvmlReturn_t rc = mig::create_gi(gpu, id, nullptr, &slot); rc != NVML_SUCCESS) return rc;
  *gi = gi_handle(gpu, slot);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceCreateGpuInstanceWithPlacement(nvmlDevice_t h, unsigned int id,
                                                      const nvmlGpuInstancePlacement_t* placement,
                                                      nvmlGpuInstance_t* gi) {
  int gpu = 0;
  const mig::GiProfile* p = nullptr;
  if (nvmlReturn_t rc =
          enter_gi_profile("nvmlDeviceCreateGpuInstanceWithPlacement", h, id, &gpu, &p);
      rc != NVML_SUCCESS)
    return rc;
  if (gi == nullptr || placement == nullptr || placement->size != p->placement_size)
    return NVML_ERROR_INVALID_ARGUMENT;
  int slot = -1;
  if (nvmlReturn_t rc = mig::create_gi(gpu, id, &placement->start, &slot); rc != NVML_SUCCESS)
    return rc;
  *gi = gi_handle(gpu, slot);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t gi) {
  int gpu = 0;
  int slot = 0;
  if (nvmlReturn_t rc = enter_gi("nvmlGpuInstanceDestroy", gi, &gpu, &slot); rc != NVML_SUCCESS)
    return rc;
  return mig::destroy_gi(gpu, slot);
}

// In GI ID order.
nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t h, unsigned int id, nvmlGpuInstance_t* gis,
                                       unsigned int* count) {
  int gpu = 0;
  const mig::GiProfile* p = nullptr;
  if (nvmlReturn_t rc = enter_gi_profile("nvmlDeviceGetGpuInstances", h, id, &gpu, &p);
      rc != NVML_SUCCESS)
    return rc;
  if (gis == nullptr || count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  simgpu::MigLock lock;
  const std::vector<int> slots =
      by_id(simgpu::state().mig[gpu].gis, simgpu::kMaxGis,
            [&](const simgpu::MigGi& g) { return g.profile == p->profile; });
  for (size_t i = 0; i < slots.size(); ++i)
    gis[i] = gi_handle(gpu, slots[i]);
  *count = static_cast<unsigned>(slots.size());
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t h, unsigned int id, nvmlGpuInstance_t* gi) {
  simgpu::Device* d = nullptr;
  if (nvmlReturn_t rc = enter("nvmlDeviceGetGpuInstanceById", h, &d); rc != NVML_SUCCESS) return rc;
  if (gi == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const int gpu = index_of(d);
  if (!mig::enabled(gpu)) return NVML_ERROR_NOT_SUPPORTED;
  const simgpu::Mig& m = simgpu::state().mig[gpu];
  for (int s = 0; s < simgpu::kMaxGis; ++s) {
    if (m.gis[s].id >= 0 && static_cast<unsigned>(m.gis[s].id) == id) {
      *gi = gi_handle(gpu, s);
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gi, nvmlGpuInstanceInfo_t* info) {
  int gpu = 0;
  int slot = 0;
  if (nvmlReturn_t rc = enter_gi("nvmlGpuInstanceGetInfo", gi, &gpu, &slot); rc != NVML_SUCCESS)
    return rc;
  if (info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const simgpu::MigGi& g = simgpu::state().mig[gpu].gis[slot];
  info->device = gpu_handle(gpu);
  info->id = static_cast<unsigned>(g.id);
  info->profileId = mig::gi_profile(gpu, g.profile)->id;
  info->placement = {g.start, g.size};
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t gi,
                                                          unsigned int profile,
                                                          unsigned int eng_profile,
                                                          nvmlComputeInstanceProfileInfo_t* info) {
  CiCall c;
  if (nvmlReturn_t rc = find_ci_profile("nvmlGpuInstanceGetComputeInstanceProfileInfo", gi, profile,
                                        info, &c, eng_profile);
      rc != NVML_SUCCESS)
    return rc;
  fill_ci_profile(*c.gi, c.profile, info);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfoV(
    nvmlGpuInstance_t gi, unsigned int profile, unsigned int eng_profile,
    nvmlComputeInstanceProfileInfo_v2_t* info) {
  CiCall c;
  if (nvmlReturn_t rc = find_ci_profile("nvmlGpuInstanceGetComputeInstanceProfileInfoV", gi,
                                        profile, info, &c, eng_profile);
      rc != NVML_SUCCESS)
    return rc;
  if (info->version == nvmlComputeInstanceProfileInfo_v3) {
    fill_ci_profile(*c.gi, c.profile, reinterpret_cast<nvmlComputeInstanceProfileInfo_v3_t*>(info));
  } else if (info->version == nvmlComputeInstanceProfileInfo_v2) {
    fill_ci_profile(*c.gi, c.profile, info);
  } else {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceRemainingCapacity(nvmlGpuInstance_t gi,
                                                                unsigned int id,
                                                                unsigned int* count) {
  CiCall c;
  if (nvmlReturn_t rc =
          find_ci_profile("nvmlGpuInstanceGetComputeInstanceRemainingCapacity", gi, id, count, &c);
      rc != NVML_SUCCESS)
    return rc;
  *count = mig::ci_remaining(c.gpu, c.slot, c.profile);
  return NVML_SUCCESS;
}

// A CI of c slices sits at multiples of c within its GI.
nvmlReturn_t nvmlGpuInstanceGetComputeInstancePossiblePlacements(
    nvmlGpuInstance_t gi, unsigned int id, nvmlComputeInstancePlacement_t* placements,
    unsigned int* count) {
  CiCall c;
  if (nvmlReturn_t rc =
          find_ci_profile("nvmlGpuInstanceGetComputeInstancePossiblePlacements", gi, id, count, &c);
      rc != NVML_SUCCESS)
    return rc;
  std::vector<nvmlComputeInstancePlacement_t> all;
  for (unsigned start = 0; start + c.profile.slices <= c.gi->slices; start += c.profile.slices)
    all.push_back({start, c.profile.slices});
  return answer_placements(all, placements, count);
}

nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t gi, unsigned int id,
                                                  nvmlComputeInstance_t* ci) {
  int gpu = 0;
  int slot = 0;
  if (nvmlReturn_t rc = enter_gi("nvmlGpuInstanceCreateComputeInstance", gi, &gpu, &slot);
      rc != NVML_SUCCESS)
    return rc;
  if (ci == nullptr || id >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT)
    return NVML_ERROR_INVALID_ARGUMENT;
  int ci_index = -1;
  if (nvmlReturn_t rc = mig::create_ci(gpu, slot, id, nullptr, &ci_index); rc != NVML_SUCCESS)
    return rc;
  *ci = ci_handle(gpu, ci_index);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceCreateComputeInstanceWithPlacement(
    nvmlGpuInstance_t gi, unsigned int id, const nvmlComputeInstancePlacement_t* placement,
    nvmlComputeInstance_t* ci) {
  CiCall c;
  if (nvmlReturn_t rc =
          find_ci_profile("nvmlGpuInstanceCreateComputeInstanceWithPlacement", gi, id, ci, &c);
      rc != NVML_SUCCESS)
    return rc;
  if (placement == nullptr || placement->size != c.profile.slices)
    return NVML_ERROR_INVALID_ARGUMENT;
  int ci_index = -1;
  if (nvmlReturn_t rc = mig::create_ci(c.gpu, c.slot, id, &placement->start, &ci_index);
      rc != NVML_SUCCESS)
    return rc;
  *ci = ci_handle(c.gpu, ci_index);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t ci) {
  int gpu = 0;
  int slot = 0;
  if (nvmlReturn_t rc = enter_ci("nvmlComputeInstanceDestroy", ci, &gpu, &slot); rc != NVML_SUCCESS)
    return rc;
  return mig::destroy_ci(gpu, slot);
}

// In CI ID order.
nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t gi, unsigned int id,
                                                nvmlComputeInstance_t* cis, unsigned int* count) {
  CiCall c;
  if (nvmlReturn_t rc = find_ci_profile("nvmlGpuInstanceGetComputeInstances", gi, id, count, &c);
      rc != NVML_SUCCESS)
    return rc;
  if (cis == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  simgpu::MigLock lock;
  const std::vector<int> slots =
      by_id(simgpu::state().mig[c.gpu].cis, simgpu::kMaxCis,
            [&](const simgpu::MigCi& ci) { return ci.gi == c.slot && ci.profile == id; });
  for (size_t i = 0; i < slots.size(); ++i)
    cis[i] = ci_handle(c.gpu, slots[i]);
  *count = static_cast<unsigned>(slots.size());
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceById(nvmlGpuInstance_t gi, unsigned int id,
                                                   nvmlComputeInstance_t* ci) {
  int gpu = 0;
  int slot = 0;
  if (nvmlReturn_t rc = enter_gi("nvmlGpuInstanceGetComputeInstanceById", gi, &gpu, &slot);
      rc != NVML_SUCCESS)
    return rc;
  if (ci == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const simgpu::Mig& m = simgpu::state().mig[gpu];
  for (int s = 0; s < simgpu::kMaxCis; ++s) {
    if (m.cis[s].id >= 0 && m.cis[s].gi == slot && static_cast<unsigned>(m.cis[s].id) == id) {
      *ci = ci_handle(gpu, s);
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlComputeInstanceGetInfo_v2(nvmlComputeInstance_t ci,
                                           nvmlComputeInstanceInfo_t* info) {
  int gpu = 0;
  int slot = 0;
  if (nvmlReturn_t rc = enter_ci("nvmlComputeInstanceGetInfo_v2", ci, &gpu, &slot);
      rc != NVML_SUCCESS)
    return rc;
  if (info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const simgpu::MigCi& c = simgpu::state().mig[gpu].cis[slot];
  info->device = gpu_handle(gpu);
  info->gpuInstance = gi_handle(gpu, c.gi);
  info->id = static_cast<unsigned>(c.id);
  info->profileId = c.profile;
  info->placement = {c.start, c.size};
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t h, unsigned int* is_mig) {
  int dev = 0;
  if (nvmlReturn_t rc = enter_any("nvmlDeviceIsMigDeviceHandle", h, &dev); rc != NVML_SUCCESS)
    return rc;
  if (is_mig == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *is_mig = simgpu::is_mig_device(dev) ? 1 : 0;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t h, unsigned int* id) {
  return id == nullptr ? NVML_ERROR_INVALID_ARGUMENT
                       : mig_ids("nvmlDeviceGetGpuInstanceId", h, id, nullptr);
}

nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t h, unsigned int* id) {
  return id == nullptr ? NVML_ERROR_INVALID_ARGUMENT
                       : mig_ids("nvmlDeviceGetComputeInstanceId", h, nullptr, id);
}

// One per compute slice with MIG on (7 on an H100/H200), 0 otherwise.
nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t h, unsigned int* count) {
  simgpu::Device* d = nullptr;
  if (nvmlReturn_t rc = enter("nvmlDeviceGetMaxMigDeviceCount", h, &d); rc != NVML_SUCCESS)
    return rc;
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *count = mig::enabled(index_of(d)) ? simgpu::kMaxCis : 0;
  return NVML_SUCCESS;
}

// Indices 0..n-1 are the GPU's n MIG devices in GI ID, then CI ID order;
// NOT_FOUND from n to the maximum.
nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t h, unsigned int index,
                                                 nvmlDevice_t* out) {
  simgpu::Device* d = nullptr;
  if (nvmlReturn_t rc = enter("nvmlDeviceGetMigDeviceHandleByIndex", h, &d); rc != NVML_SUCCESS)
    return rc;
  if (out == nullptr || index >= static_cast<unsigned>(simgpu::kMaxCis))
    return NVML_ERROR_INVALID_ARGUMENT;
  const int gpu = index_of(d);
  if (!mig::enabled(gpu)) return NVML_ERROR_NOT_SUPPORTED;
  const std::vector<int> slots = mig::mig_devices(gpu);
  if (index >= slots.size()) return NVML_ERROR_NOT_FOUND;
  *out = reinterpret_cast<nvmlDevice_t>(ci_handle(gpu, slots[index]));
  return NVML_SUCCESS;
}

// A MIG device: its CI's SMs, its GI's and CI's compute slices and its
// memory; a GPU: all of its SMs and memory, no slices (what a real driver
// answers with MIG off).
nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t h, nvmlDeviceAttributes_t* a) {
  int dev = 0;
  if (nvmlReturn_t rc = enter_any("nvmlDeviceGetAttributes_v2", h, &dev); rc != NVML_SUCCESS)
    return rc;
  if (a == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *a = {};
  a->multiprocessorCount = mig::sm_count(dev);
  a->memorySizeMB = simgpu::device_total(dev) >> 20;
  if (simgpu::is_mig_device(dev)) {
    const int gpu = simgpu::gpu_of(dev);
    const simgpu::MigCi& c = simgpu::state().mig[gpu].cis[dev - simgpu::mig_device(gpu, 0)];
    if (const mig::GiProfile* p = mig::gi_profile_of(dev)) {
      a->gpuInstanceSliceCount = p->slices;
      a->sharedCopyEngineCount = p->copy_engines;
      a->sharedDecoderCount = p->decoders;
      a->sharedJpegCount = p->jpegs;
    }
    a->computeInstanceSliceCount = c.size;
  }
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t h, nvmlDevice_t* parent) {
  int dev = 0;
  if (nvmlReturn_t rc = enter_any("nvmlDeviceGetDeviceHandleFromMigDeviceHandle", h, &dev);
      rc != NVML_SUCCESS)
    return rc;
  if (parent == nullptr || !simgpu::is_mig_device(dev)) return NVML_ERROR_INVALID_ARGUMENT;
  *parent = gpu_handle(simgpu::gpu_of(dev));
  return NVML_SUCCESS;
}

}  // extern "C"

// ---------------------------------------------------------------- events

#ifndef SIMGPU_NVML_NO_EVENTS

namespace {

constexpr unsigned long long kSupportedEvents = 0x1f;  // ECC, PState, Xid, clock
constexpr uint32_t kEventSetMagic = 0x5e7e5e75;

struct EventSet {
  uint32_t magic = kEventSetMagic;
  std::atomic<unsigned long long> registered[simgpu::kMaxDevices] = {};
};

EventSet* event_set(nvmlEventSet_t set) {
  auto* e = reinterpret_cast<EventSet*>(set);
  return e != nullptr && e->magic == kEventSetMagic ? e : nullptr;
}

// Polls the script every 2 ms for an xid line of a device registered on `set`.
nvmlReturn_t wait_event(const char* fn, nvmlEventSet_t set, nvmlEventData_t* data,
                        unsigned int timeoutms, bool v2) {
  if (nvmlReturn_t rc = enter(fn); rc != NVML_SUCCESS) return rc;
  EventSet* e = event_set(set);
  if (e == nullptr || data == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutms);
  while (true) {
    ScriptXid x{};
    while (take_xid(&x)) {
      simgpu::State& st = simgpu::state();
      if (static_cast<uint32_t>(x.device) >= st.device_count ||
          (e->registered[x.device].load() & nvmlEventTypeXidCriticalError) == 0)
        continue;  // nobody listens: the event is lost, as with a real driver
      data->device = reinterpret_cast<nvmlDevice_t>(&st.devices[x.device]);
      data->eventType = nvmlEventTypeXidCriticalError;
      data->eventData = x.xid;
      if (v2) {
        data->gpuInstanceId = x.gi;
        data->computeInstanceId = x.ci;
      }
      return NVML_SUCCESS;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return NVML_ERROR_TIMEOUT;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
        deadline - now, std::chrono::milliseconds(2)));
  }
}

}  // namespace

extern "C" {

// Without SIMGPU_NVML_SCRIPT there is nothing to deliver events from: the
// set cannot be created (NVML_ERROR_NOT_SUPPORTED), as on a GPU without them.
nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  if (nvmlReturn_t rc = enter("nvmlEventSetCreate"); rc != NVML_SUCCESS) return rc;
  if (set == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const char* path = std::getenv("SIMGPU_NVML_SCRIPT");
  if (path == nullptr || *path == '\0') return NVML_ERROR_NOT_SUPPORTED;
  *set = reinterpret_cast<nvmlEventSet_t>(new EventSet);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  if (nvmlReturn_t rc = enter("nvmlEventSetFree"); rc != NVML_SUCCESS) return rc;
  EventSet* e = event_set(set);
  if (e == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  e->magic = 0;
  delete e;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t h, unsigned long long* types) {
  simgpu::Device* d = nullptr;
  if (nvmlReturn_t rc = enter("nvmlDeviceGetSupportedEventTypes", h, &d); rc != NVML_SUCCESS)
    return rc;
  if (types == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *types = kSupportedEvents;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t h, unsigned long long types,
                                      nvmlEventSet_t set) {
  simgpu::Device* d = nullptr;
  if (nvmlReturn_t rc = enter("nvmlDeviceRegisterEvents", h, &d); rc != NVML_SUCCESS) return rc;
  EventSet* e = event_set(set);
  if (e == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if ((types & ~kSupportedEvents) != 0) return NVML_ERROR_NOT_SUPPORTED;
  e->registered[index_of(d)].fetch_or(types);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data,
                                 unsigned int timeoutms) {
  return wait_event("nvmlEventSetWait_v2", set, data, timeoutms, true);
}

// The v1 struct ends after eventData.
nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_t* data, unsigned int timeoutms) {
  return wait_event("nvmlEventSetWait", set, data, timeoutms, false);
}

}  // extern "C"

#endif  // SIMGPU_NVML_NO_EVENTS
