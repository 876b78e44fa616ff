#include "sim_mig.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "nvml/nvml_abi.hpp"

namespace simgpu::mig {
namespace {

using namespace hami::nvml::abi;  // NOLINT: nvml.h's names

constexpr unsigned kMemorySlices = 8;
constexpr unsigned kGpuSms = 132;

// Engines (CE, DEC, ENC, JPEG, OFA) are the same on both GPUs; the H200's row
// is measured (tests/gpu/results/mig-profiles-h200.txt: nvidia-smi mig -lgip,
// driver 580), the H100's memory, SMs and instance counts are NVIDIA's
// published H100 80GB table (the MIG user guide), memory as nvidia-smi prints
// it (9.75 GiB = 9984 MiB). Placements, in memory slices of 8, are the same
// on both (the guide's H100 table; nvidia-smi mig -lgipp on a MIG-enabled GPU
// would confirm the H200's).
std::vector<GiProfile> table(const char* g1, const char* g1me, const char* g1x2, const char* g2,
                             const char* g3, const char* g4, const char* g7,
                             unsigned long long mib1, unsigned long long mib2,
                             unsigned long long mib4, unsigned long long mib7) {
  return {
      {NVML_GPU_INSTANCE_PROFILE_1_SLICE,
       19,
       g1,
       1,
       7,
       16,
       1,
       1,
       0,
       1,
       0,
       mib1,
       1,
       {0, 1, 2, 3, 4, 5, 6}},
      {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1,
       20,
       g1me,
       1,
       1,
       16,
       1,
       1,
       0,
       1,
       1,
       mib1,
       1,
       {0, 1, 2, 3, 4, 5, 6}},
      {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2,
       15,
       g1x2,
       1,
       4,
       26,
       1,
       1,
       0,
       1,
       0,
       mib2,
       2,
       {0, 2, 4, 6}},
      {NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, g2, 2, 3, 32, 2, 2, 0, 2, 0, mib2, 2, {0, 2, 4}},
      {NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, g3, 3, 2, 60, 3, 3, 0, 3, 0, mib4, 4, {0, 4}},
      {NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, g4, 4, 1, 64, 4, 4, 0, 4, 0, mib4, 4, {0}},
      {NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, g7, 7, 1, kGpuSms, 8, 7, 0, 7, 1, mib7, 8, {0}},
  };
}

enum : uint32_t { kNoMig = 0, kH100_80GB = 1, kH200 = 2 };

const std::vector<GiProfile>& geometry(uint32_t g) {
  static const std::vector<GiProfile> none;
  static const std::vector<GiProfile> h100 =
      table("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb", 9984,
            20224, 40192, 81152);
  static const std::vector<GiProfile> h200 =
      table("1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb", 16384,
            33280, 71424, 143360);
  return g == kH100_80GB ? h100 : g == kH200 ? h200 : none;
}

// The state being configured (configure()), while state() is still being
// initialised and the state file's flock is held; nullptr afterwards.
State* g_configuring = nullptr;

State& st() {
  return g_configuring != nullptr ? *g_configuring : state();
}

// MigLock, except while configuring: nobody else is attached then, and the
// file lock is already held.
struct Guard {
  std::optional<MigLock> lock;
  Guard() {
    if (g_configuring == nullptr) lock.emplace();
  }
};

Mig& mig_of(int gpu) {
  return st().mig[gpu];
}

bool valid_gpu(int gpu) {
  return gpu >= 0 && static_cast<uint32_t>(gpu) < st().device_count;
}

// The real driver also derives a GI's ID from its placement; these IDs are
// the simulator's choice (7g 0; 4 slices at 0 and 4: 1, 2; 2 slices: 3-6;
// 1 slice: 7-13). Placements never overlap, so the IDs never collide.
int32_t gi_id_for(unsigned start, unsigned size) {
  switch (size) {
    case 8:
      return 0;
    case 4:
      return start == 0 ? 1 : 2;
    case 2:
      return static_cast<int32_t>(3 + start / 2);
    default:
      return static_cast<int32_t>(7 + start);
  }
}

bool overlaps(const Mig& m, unsigned start, unsigned size) {
  for (const MigGi& g : m.gis) {
    if (g.id >= 0 && start < g.start + g.size && g.start < start + size) return true;
  }
  return false;
}

unsigned gis_of_profile(const Mig& m, unsigned profile) {
  unsigned n = 0;
  for (const MigGi& g : m.gis) {
    if (g.id >= 0 && g.profile == profile) ++n;
  }
  return n;
}

// A deterministic UUID for the same sequence of creations (so a SIMGPU_MIG
// layout gives the same MIG- UUIDs every run), a new one for each creation.
void make_uuid(const Device& gpu, uint32_t serial, int32_t gi, int32_t ci, char* out, size_t len) {
  char key[160];
  std::snprintf(key, sizeof key, "%s/%u/%d/%d", gpu.uuid, serial, gi, ci);
  uint64_t h[2] = {0xcbf29ce484222325ull, 0x84222325cbf29ce4ull};
  for (int k = 0; k < 2; ++k) {
    for (const char* p = key; *p != '\0'; ++p)
      h[k] = (h[k] ^ static_cast<unsigned char>(*p)) * 0x100000001b3ull;
  }
  std::snprintf(out, len, "MIG-%08x-%04x-4%03x-%04x-%012llx", static_cast<unsigned>(h[0] >> 32),
                static_cast<unsigned>(h[0] >> 16) & 0xffffu, static_cast<unsigned>(h[0]) & 0xfffu,
                0x8000u | (static_cast<unsigned>(h[1] >> 48) & 0x3fffu),
                static_cast<unsigned long long>(h[1] & 0xffffffffffffull));
}

uint64_t ci_used(int gpu, int slot) {
  uint64_t sum = 0;
  for (Proc& p : st().procs) {
    if (p.pid.load() > 0) sum += p.mig_used[gpu][slot].load();
  }
  return sum;
}

}  // namespace

uint32_t geometry_for(const char* name) {
  if (std::strstr(name, "H200") != nullptr) return kH200;
  if (std::strstr(name, "H100") != nullptr && std::strstr(name, "80GB") != nullptr)
    return kH100_80GB;
  return kNoMig;
}

const std::vector<GiProfile>& gi_profiles(int gpu) {
  return geometry(valid_gpu(gpu) ? mig_of(gpu).geometry : kNoMig);
}

const GiProfile* gi_profile(int gpu, unsigned profile) {
  for (const GiProfile& p : gi_profiles(gpu)) {
    if (p.profile == profile) return &p;
  }
  return nullptr;
}

const GiProfile* gi_profile_by_id(int gpu, unsigned id) {
  for (const GiProfile& p : gi_profiles(gpu)) {
    if (p.id == id) return &p;
  }
  return nullptr;
}

// A GI of n slices offers CIs of 1, 2, 3 and 4 slices up to n, and one of
// all n (a 7g GI: 1c, 2c, 3c, 4c, 7g), as nvidia-smi mig -lcip lists them.
// A partial CI's SMs are its slices times a one-slice GI's; the whole-GI CI
// has all the GI's. NVIDIA publishes no per-CI table; the simulator's choice.
bool ci_profile(const GiProfile& gi, unsigned profile, CiProfile* out) {
  static const unsigned kSlices[] = {1, 2, 3, 4, 7};  // NVML_COMPUTE_INSTANCE_PROFILE_{1..7}_SLICE
  if (profile > NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE) return false;
  const unsigned c = kSlices[profile];
  if (c > gi.slices || (c == 7 && gi.slices != 7)) return false;
  out->profile = profile;
  out->slices = c;
  out->instances = gi.slices / c;
  out->sms = c == gi.slices ? gi.sms : c * 16;
  out->name =
      c == gi.slices ? std::string(gi.name) : std::to_string(c) + "c." + std::string(gi.name);
  return true;
}

bool capable(int gpu) {
  return !gi_profiles(gpu).empty();
}

bool enabled(int gpu) {
  return capable(gpu) && mig_of(gpu).mode == NVML_DEVICE_MIG_ENABLE;
}

int set_mode(int gpu, unsigned mode, int* activation) {
  Guard lock;
  Mig& m = mig_of(gpu);
  m.pending = mode;
  bool idle = device_used(gpu) == 0;
  for (const MigGi& g : m.gis)
    idle = idle && g.id < 0;
  *activation = idle ? NVML_SUCCESS : NVML_ERROR_IN_USE;
  if (idle) m.mode = mode;
  return NVML_SUCCESS;
}

unsigned gi_remaining(int gpu, const GiProfile& p) {
  // With MIG off there are no instances: everything fits, as the real driver
  // answers (tests/gpu/results/mig-probe-h200.txt).
  Guard lock;
  const Mig& m = mig_of(gpu);
  const unsigned have = gis_of_profile(m, p.profile);
  if (have >= p.instances) return 0;
  // Placements of one size are aligned to it, so taking them greedily in
  // order counts how many fit.
  unsigned fit = 0;
  unsigned end = 0;
  for (unsigned s : p.starts) {
    if (s >= end && !overlaps(m, s, p.placement_size)) {
      ++fit;
      end = s + p.placement_size;
    }
  }
  return std::min(fit, p.instances - have);
}

int create_gi(int gpu, unsigned id, const unsigned* start, int* slot) {
  const GiProfile* p = gi_profile_by_id(gpu, id);
  if (p == nullptr) return capable(gpu) ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_NOT_SUPPORTED;
  if (!enabled(gpu)) return NVML_ERROR_NOT_SUPPORTED;
  if (start != nullptr && std::find(p->starts.begin(), p->starts.end(), *start) == p->starts.end())
    return NVML_ERROR_INVALID_ARGUMENT;
  Guard lock;
  Mig& m = mig_of(gpu);
  if (gis_of_profile(m, p->profile) >= p->instances) return NVML_ERROR_INSUFFICIENT_RESOURCES;
  int free_slot = -1;
  for (int i = 0; i < kMaxGis && free_slot < 0; ++i) {
    if (m.gis[i].id < 0) free_slot = i;
  }
  for (unsigned s : p->starts) {
    if (start != nullptr && s != *start) continue;
    if (free_slot < 0 || overlaps(m, s, p->placement_size)) continue;
    m.gis[free_slot] = MigGi{gi_id_for(s, p->placement_size), p->profile, s, p->placement_size};
    ++m.serial;
    *slot = free_slot;
    return NVML_SUCCESS;
  }
  return NVML_ERROR_INSUFFICIENT_RESOURCES;
}

int destroy_gi(int gpu, int slot) {
  Guard lock;
  Mig& m = mig_of(gpu);
  if (m.gis[slot].id < 0) return NVML_ERROR_INVALID_ARGUMENT;
  for (const MigCi& c : m.cis) {
    if (c.id >= 0 && c.gi == slot) return NVML_ERROR_IN_USE;
  }
  m.gis[slot].id = -1;
  return NVML_SUCCESS;
}

namespace {

bool ci_overlaps(const Mig& m, int gi_slot, unsigned start, unsigned size) {
  for (const MigCi& c : m.cis) {
    if (c.id >= 0 && c.gi == gi_slot && start < c.start + c.size && c.start < start + size)
      return true;
  }
  return false;
}

}  // namespace

unsigned ci_remaining(int gpu, int gi_slot, const CiProfile& p) {
  Guard lock;
  const Mig& m = mig_of(gpu);
  unsigned have = 0;
  unsigned fit = 0;
  for (const MigCi& c : m.cis) {
    if (c.id >= 0 && c.gi == gi_slot && c.profile == p.profile) ++have;
  }
  for (unsigned s = 0; s + p.slices <= gi_profile(gpu, m.gis[gi_slot].profile)->slices;
       s += p.slices) {
    if (!ci_overlaps(m, gi_slot, s, p.slices)) ++fit;
  }
  return have >= p.instances ? 0 : std::min(fit, p.instances - have);
}

int create_ci(int gpu, int gi_slot, unsigned profile, const unsigned* start, int* slot) {
  Guard lock;
  Mig& m = mig_of(gpu);
  if (m.gis[gi_slot].id < 0) return NVML_ERROR_INVALID_ARGUMENT;
  const GiProfile* gp = gi_profile(gpu, m.gis[gi_slot].profile);
  CiProfile p;
  if (!ci_profile(*gp, profile, &p)) return NVML_ERROR_NOT_SUPPORTED;
  if (start != nullptr && (*start % p.slices != 0 || *start + p.slices > gp->slices))
    return NVML_ERROR_INVALID_ARGUMENT;
  unsigned have = 0;
  int32_t id = 0;
  int free_slot = -1;
  for (int i = 0; i < kMaxCis; ++i) {
    const MigCi& c = m.cis[i];
    if (c.id < 0) {
      if (free_slot < 0) free_slot = i;
      continue;
    }
    if (c.gi == gi_slot && c.profile == profile) ++have;
  }
  if (have >= p.instances || free_slot < 0) return NVML_ERROR_INSUFFICIENT_RESOURCES;
  // CI IDs: the lowest free within the GI.
  for (bool taken = true; taken; ++id) {
    taken = false;
    for (const MigCi& c : m.cis)
      taken = taken || (c.id == id && c.gi == gi_slot);
    if (!taken) break;
  }
  for (unsigned s = 0; s + p.slices <= gp->slices; s += p.slices) {
    if ((start != nullptr && s != *start) || ci_overlaps(m, gi_slot, s, p.slices)) continue;
    MigCi& c = m.cis[free_slot];
    c.gi = gi_slot;
    c.profile = profile;
    c.start = s;
    c.size = p.slices;
    make_uuid(st().devices[gpu], ++m.serial, m.gis[gi_slot].id, id, c.uuid, sizeof c.uuid);
    c.id = id;
    *slot = free_slot;
    return NVML_SUCCESS;
  }
  return NVML_ERROR_INSUFFICIENT_RESOURCES;
}

int destroy_ci(int gpu, int slot) {
  Guard lock;
  MigCi& c = mig_of(gpu).cis[slot];
  if (c.id < 0) return NVML_ERROR_INVALID_ARGUMENT;
  reap_dead_processes();
  if (ci_used(gpu, slot) != 0) return NVML_ERROR_IN_USE;
  c.id = -1;
  return NVML_SUCCESS;
}

std::vector<int> mig_devices(int gpu) {
  std::vector<int> out;
  if (!enabled(gpu)) return out;
  const Mig& m = mig_of(gpu);
  for (int i = 0; i < kMaxCis; ++i) {
    if (m.cis[i].id >= 0) out.push_back(i);
  }
  auto key = [&](int s) { return std::pair(m.gis[m.cis[s].gi].id, m.cis[s].id); };
  std::sort(out.begin(), out.end(), [&](int a, int b) { return key(a) < key(b); });
  return out;
}

int find_mig_device(const char* uuid) {
  for (uint32_t g = 0; g < st().device_count; ++g) {
    for (int s : mig_devices(static_cast<int>(g))) {
      if (std::strcmp(st().mig[g].cis[s].uuid, uuid) == 0)
        return mig_device(static_cast<int>(g), s);
    }
  }
  return -1;
}

const GiProfile* gi_profile_of(int dev) {
  const int gpu = gpu_of(dev);
  const MigCi& c = mig_of(gpu).cis[dev - mig_device(gpu, 0)];
  return gi_profile(gpu, mig_of(gpu).gis[c.gi].profile);
}

std::string device_name(int dev) {
  const int gpu = gpu_of(dev);
  std::string name = state().devices[gpu].name;
  if (!is_mig_device(dev)) return name;
  const MigCi& c = mig_of(gpu).cis[dev - mig_device(gpu, 0)];
  CiProfile p;
  const GiProfile* gp = gi_profile_of(dev);
  if (gp == nullptr || !ci_profile(*gp, c.profile, &p)) return name;
  return name + " MIG " + p.name;
}

unsigned sm_count(int dev) {
  if (!is_mig_device(dev)) return kGpuSms;
  const int gpu = gpu_of(dev);
  CiProfile p;
  const GiProfile* gp = gi_profile_of(dev);
  if (gp == nullptr || !ci_profile(*gp, mig_of(gpu).cis[dev - mig_device(gpu, 0)].profile, &p))
    return 0;
  return p.sms;
}

// SIMGPU_MIG=<gpu>:<layout>[;<gpu>:<layout>...], layout `on`, `off`, or GI
// profile names in creation order, each optionally @<start>, each given one
// compute instance of all its slices (nvidia-smi mig -cgi ... -C).
void configure(State& state) {
  g_configuring = &state;
  struct Done {
    ~Done() { g_configuring = nullptr; }
  } done;
  for (uint32_t g = 0; g < kMaxDevices; ++g) {
    Mig& m = state.mig[g];
    m = Mig{};
    m.geometry = g < state.device_count ? geometry_for(state.devices[g].name) : kNoMig;
    m.mode = m.pending = NVML_DEVICE_MIG_DISABLE;
    for (MigGi& gi : m.gis)
      gi.id = -1;
    for (MigCi& ci : m.cis)
      ci.id = -1;
  }
  const char* env = std::getenv("SIMGPU_MIG");
  if (env == nullptr) return;
  const std::string spec = env;
  size_t pos = 0;
  while (pos < spec.size()) {
    size_t end = spec.find(';', pos);
    if (end == std::string::npos) end = spec.size();
    const std::string item = spec.substr(pos, end - pos);
    pos = end + 1;
    const size_t colon = item.find(':');
    const int gpu = std::atoi(item.c_str());
    if (colon == std::string::npos || !valid_gpu(gpu) || !capable(gpu)) {
      std::fprintf(stderr, "simgpu: SIMGPU_MIG: ignored: %s (no such MIG-capable GPU)\n",
                   item.c_str());
      continue;
    }
    const std::string layout = item.substr(colon + 1);
    state.mig[gpu].mode = state.mig[gpu].pending =
        layout == "off" ? NVML_DEVICE_MIG_DISABLE : NVML_DEVICE_MIG_ENABLE;
    if (layout == "on" || layout == "off") continue;
    size_t at = 0;
    while (at < layout.size()) {
      size_t stop = layout.find(',', at);
      if (stop == std::string::npos) stop = layout.size();
      const std::string gi = layout.substr(at, stop - at);
      at = stop + 1;
      const size_t sign = gi.find('@');
      const std::string name = gi.substr(0, sign);
      const unsigned start =
          sign == std::string::npos ? 0 : static_cast<unsigned>(std::atoi(gi.c_str() + sign + 1));
      const GiProfile* p = nullptr;
      for (const GiProfile& q : gi_profiles(gpu)) {
        if (name == q.name) p = &q;
      }
      int gi_slot = -1;
      int ci_slot = -1;
      CiProfile whole;
      if (p == nullptr ||
          create_gi(gpu, p->id, sign == std::string::npos ? nullptr : &start, &gi_slot) !=
              NVML_SUCCESS ||
          !ci_profile(*p, p->slices == 7 ? NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE : p->slices - 1,
                      &whole) ||
          create_ci(gpu, gi_slot, whole.profile, nullptr, &ci_slot) != NVML_SUCCESS)
        std::fprintf(stderr, "simgpu: SIMGPU_MIG: GPU %d: cannot create %s\n", gpu, gi.c_str());
    }
  }
}

}  // namespace simgpu::mig
