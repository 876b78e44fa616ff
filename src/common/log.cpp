#include "common/log.hpp"

#include <unistd.h>

#include <algorithm>
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
  if (const char* env = std::getenv(kLevelEnv); env != nullptr && *env != '\0') {
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

namespace {

// Control characters in a message become visible escapes (\n, \t, \x1b...):
// messages carry names that others chose (files in a tenant's directory, HTTP
// paths), and a newline or a terminal escape in one must not forge a line of
// its own or rewrite the reader's screen. Returns the bytes written to `out`.
size_t escape_into(const char* in, size_t n, char* out, size_t cap) {
  static const char kHex[] = "0123456789abcdef";
  size_t o = 0;
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(in[i]);
    char esc[4];
    size_t len = 0;
    if (c == '\n') {
      esc[0] = '\\', esc[1] = 'n', len = 2;
    } else if (c == '\r') {
      esc[0] = '\\', esc[1] = 'r', len = 2;
    } else if (c == '\t') {
      esc[0] = '\\', esc[1] = 't', len = 2;
    } else if (c < 0x20 || c == 0x7f) {
      esc[0] = '\\', esc[1] = 'x', esc[2] = kHex[c >> 4], esc[3] = kHex[c & 15], len = 4;
    } else {
      esc[0] = static_cast<char>(c), len = 1;
    }
    if (o + len > cap) break;
    for (size_t k = 0; k < len; ++k)
      out[o++] = esc[k];
  }
  return o;
}

}  // namespace

void vwrite(Level l, const char* fmt, va_list ap) {
  const int saved_errno = errno;  // logging must never change what the caller sees
  char msg[1024];
  const int m = std::vsnprintf(msg, sizeof msg, fmt, ap);
  const size_t msg_len = m < 0 ? 0 : std::min(static_cast<size_t>(m), sizeof msg - 1);
  char buf[2048];
  int n = std::snprintf(buf, sizeof buf, "[%s pid %d] %s: ", g_component.load(), ::getpid(),
                        level_name(l));
  if (n < 0) n = 0;
  n +=
      static_cast<int>(escape_into(msg, msg_len, buf + n, sizeof buf - 1 - static_cast<size_t>(n)));
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
