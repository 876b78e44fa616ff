// The limits file and size values, as the device plugin (or a user) writes
// them: the input is split at the first NUL into a limits file and a value for
// CUDA_DEVICE_MEMORY_LIMIT in the environment.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/size_parse.hpp"
#include "vgpu/config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string file = input.substr(0, nul);
  const std::string env_value = nul == std::string::npos ? "" : input.substr(nul + 1);
  (void)hami::parse_size(env_value);
  (void)hami::parse_percent(env_value);

  hami::vgpu::ConfigSources src;
  src.fixed_limits_file = hami::vgpu::kFixedLimitsFile;
  src.env = [&](const std::string& k) -> std::optional<std::string> {
    if (k == "CUDA_DEVICE_MEMORY_LIMIT") return env_value;
    return std::nullopt;
  };
  src.read_file = [&](const std::string&) -> hami::Result<std::optional<std::string>> {
    return std::optional<std::string>(file);
  };
  const auto cfg = hami::vgpu::load_config(src);
  // Whatever the file says, a device is either limited, refused or unlimited,
  // and an error is always explained.
  for (int d = 0; d < hami::vgpu::kMaxDevices; ++d) {
    if (cfg.sm_limit[d] == 0 || cfg.sm_limit[d] > 100) __builtin_trap();
  }
  for (const auto& e : cfg.errors) {
    if (e.empty()) __builtin_trap();
  }
  return 0;
}
