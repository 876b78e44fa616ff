#pragma once
// Logging for code that runs inside other people's programs (libvgpu.so) and
// for the daemons. One line per event on stderr, "[vgpu pid N] LEVEL: text".
// The level comes from LIBCUDA_LOG_LEVEL (upstream's name): 0 silent,
// 1 errors (default), 2 + warnings, 3 + info, 4 + debug. Formatting uses a
// stack buffer and one write(2): no allocation, no locks, no stdio state.
//
//   hami::log::error("CUDA_DEVICE_MEMORY_LIMIT_0=%s: %s", value, why);
//   if (hami::log::enabled(hami::log::Level::kDebug)) ...

#include <cstdarg>

namespace hami::log {

// The variable, upstream's name (the container contract re-exports it).
inline constexpr const char* kLevelEnv = "LIBCUDA_LOG_LEVEL";

enum class Level : int { kSilent = 0, kError = 1, kWarn = 2, kInfo = 3, kDebug = 4 };

// Reads LIBCUDA_LOG_LEVEL once; later calls are free. Safe to call anywhere.
Level level();
inline bool enabled(Level l) {
  return static_cast<int>(level()) >= static_cast<int>(l);
}
// Tests and daemons may set the level explicitly; overrides the environment.
void set_level(Level l);
// Prefix for every line, e.g. "vgpu" or "vgpu-agent". Must outlive all logging.
void set_component(const char* name);

void write(Level l, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void vwrite(Level l, const char* fmt, va_list ap) __attribute__((format(printf, 2, 0)));

#define HAMI_LOG_FN(fn, lvl)                                                   \
  __attribute__((format(printf, 1, 2))) inline void fn(const char* fmt, ...) { \
    if (!enabled(lvl)) return;                                                 \
    va_list ap;                                                                \
    va_start(ap, fmt);                                                         \
    vwrite(lvl, fmt, ap);                                                      \
    va_end(ap);                                                                \
  }
HAMI_LOG_FN(error, Level::kError)
HAMI_LOG_FN(warn, Level::kWarn)
HAMI_LOG_FN(info, Level::kInfo)
HAMI_LOG_FN(debug, Level::kDebug)
#undef HAMI_LOG_FN

}  // namespace hami::log
