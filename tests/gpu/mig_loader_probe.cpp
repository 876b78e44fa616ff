// The device plugin's own MIG reads against the real driver: the NVML
// loader's MIG mode, MIG device count and MIG devices (static MIG) and the
// MIG manager's GPU-instance profiles and instances (dynamic MIG), each
// printed with PASS when the answer is one the plugin handles, FAIL when it
// is an error. Read-only: nothing here makes or removes an instance.
//   built and run by tests/gpu/mig_probe.sh
#include <cstdio>
#include <string>

#include "nvml/mig_control.hpp"
#include "nvml/nvml.hpp"

using namespace hami;

int main() {
  int fails = 0;
  auto check = [&](bool ok, const std::string& what) {
    std::printf("%s loader: %s\n", ok ? "PASS" : "FAIL", what.c_str());
    fails += !ok;
  };
  auto lib = nvml::Library::open();
  if (!lib) {
    check(false, "open libnvidia-ml.so.1: " + lib.error().message);
    return 1;
  }
  auto mig = nvml::MigControl::open();
  check(bool(mig), mig ? "MigControl opened" : "MigControl: " + mig.error().message);
  auto n = (*lib)->device_count();
  check(bool(n), n ? std::to_string(*n) + " GPU(s)" : "device count: " + n.error().message);
  for (int i = 0; n && i < *n; ++i) {
    const std::string gpu = "GPU " + std::to_string(i);
    auto mode = (*lib)->mig_mode(i);
    check(bool(mode), mode ? gpu + " MIG mode current " + std::to_string(mode->current) +
                                 " pending " + std::to_string(mode->pending)
                           : gpu + " MIG mode: " + mode.error().message);
    auto max = (*lib)->max_mig_devices(i);
    check(bool(max), max ? gpu + " max MIG devices " + std::to_string(*max)
                         : gpu + " max MIG devices: " + max.error().message);
    auto devs = (*lib)->mig_devices(i);
    check(bool(devs), devs ? gpu + " MIG devices " + std::to_string(devs->size())
                           : gpu + " MIG devices: " + devs.error().message);
    if (devs) {
      for (const auto& d : *devs)
        std::printf("  %s %s %llu MiB GI %u CI %u SMs %u\n", d.uuid.c_str(), d.profile.c_str(),
                    static_cast<unsigned long long>(d.memory_total >> 20), d.gpu_instance_id,
                    d.compute_instance_id, d.sm_count);
    }
    if (!mig) continue;
    auto profiles = (*mig)->profiles(i);
    // Empty for a GPU without MIG; NVML describes them with MIG off too.
    check(bool(profiles), profiles
                              ? gpu + " GPU-instance profiles " + std::to_string(profiles->size())
                              : gpu + " profiles: " + profiles.error().message);
    if (profiles) {
      for (const auto& p : *profiles) {
        std::string pl;
        for (const auto& g : p.placements)
          pl += " " + std::to_string(g.start) + ":" + std::to_string(g.size);
        std::printf(
            "  profile %u id %u %-10s slices %u instances %u SMs %u %llu MiB placements%s\n",
            p.profile, p.id, p.name.c_str(), p.slices, p.instances, p.sms,
            static_cast<unsigned long long>(p.memory_mib), pl.c_str());
      }
    }
    auto inst = (*mig)->instances(i);
    check(bool(inst), inst ? gpu + " GPU instances " + std::to_string(inst->size())
                           : gpu + " GPU instances: " + inst.error().message);
  }
  std::printf("# loader probe: %d failure(s)\n", fails);
  return fails == 0 ? 0 : 1;
}
