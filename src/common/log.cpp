#include "common/log.hpp"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace hami::log {
namespace {

constexpr int kUnread = -1;
std::atomic<int> g_level{kUnread};
std::atomic<const char*> g_component{"vgpu"};

const char* level_name(Level l) {
  switch (l) {
    case Level::kError:
      return "ERROR";
    case Level::kWarn:
      return "WARN";
    case Level::kInfo:
      return "INFO";
    case Level::kDebug:
      return "DEBUG";
    case Level::kSilent:
      break;
  }
  return "";
}

}  // namespace

Level level() {
  int l = g_level.load(std::memory_order_relaxed);
  if (l != kUnread) return static_cast<Level>(l);
  l = static_cast<int>(Level::kError);
  if (const char* env = std::getenv("LIBCUDA_LOG_LEVEL"); env != nullptr && *env != '\0') {
    char* end = nullptr;
    const long v = std::strtol(env, &end, 10);
    if (end != env && *end == '\0') l = v < 0 ? 0 : (v > 4 ? 4 : static_cast<int>(v));
  }
  g_level.store(l, std::memory_order_relaxed);
  return static_cast<Level>(l);
}

void set_level(Level l) {
  g_level.store(static_cast<int>(l), std::memory_order_relaxed);
}
void set_component(const char* name) {
  g_component.store(name, std::memory_order_relaxed);
}

void vwrite(Level l, const char* fmt, va_list ap) {
  const int saved_errno = errno;  // logging must never change what the caller sees
  char buf[1024];
  int n = std::snprintf(buf, sizeof buf, "[%s pid %d] %s: ", g_component.load(), ::getpid(),
                        level_name(l));
  if (n < 0) n = 0;
  if (static_cast<size_t>(n) < sizeof buf) {
    const int m = std::vsnprintf(buf + n, sizeof buf - static_cast<size_t>(n), fmt, ap);
    if (m > 0) n += m;
  }
  if (static_cast<size_t>(n) >= sizeof buf - 1) n = static_cast<int>(sizeof buf) - 2;
  buf[n++] = '\n';
  const char* p = buf;
  while (n > 0) {
    const ssize_t w = ::write(2, p, static_cast<size_t>(n));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    p += w;
    n -= static_cast<int>(w);
  }
  errno = saved_errno;
}

void write(Level l, const char* fmt, ...) {
  if (!enabled(l)) return;
  va_list ap;
  va_start(ap, fmt);
  vwrite(l, fmt, ap);
  va_end(ap);
}

}  // namespace hami::log
