#include "k8s/time.hpp"

#include <cstdio>
#include <ctime>

namespace hami::k8s {
namespace {

std::string format(TimePoint t, bool micro) {
  using namespace std::chrono;
  const auto since = t.time_since_epoch();
  auto secs = duration_cast<seconds>(since);
  auto frac = duration_cast<microseconds>(since - secs).count();
  if (frac < 0) {  // before 1970: floor, so the fraction stays positive
    secs -= seconds(1);
    frac += 1000000;
  }
  const std::time_t tt = static_cast<std::time_t>(secs.count());
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[64];
  if (micro) {
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                  static_cast<long long>(frac));
  } else {
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
  }
  return buf;
}

bool digits(std::string_view s, size_t pos, size_t n, int& out) {
  if (pos + n > s.size()) return false;
  int v = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (s[i] - '0');
  }
  out = v;
  return true;
}

}  // namespace

std::string format_time(TimePoint t) {
  return format(t, false);
}
std::string format_micro_time(TimePoint t) {
  return format(t, true);
}

hami::Result<TimePoint> parse_time(std::string_view s) {
  auto bad = [&](const char* why) {
    return hami::Error{"time \"" + std::string(s.substr(0, 64)) + "\": " + why};
  };
  std::tm tm{};
  int year = 0, mon = 0, day = 0, hour = 0, min = 0, sec = 0;
  if (!digits(s, 0, 4, year) || s.size() < 20 || s[4] != '-' || !digits(s, 5, 2, mon) ||
      s[7] != '-' || !digits(s, 8, 2, day) || (s[10] != 'T' && s[10] != 't') ||
      !digits(s, 11, 2, hour) || s[13] != ':' || !digits(s, 14, 2, min) || s[16] != ':' ||
      !digits(s, 17, 2, sec)) {
    return bad("not RFC 3339 (want 2006-01-02T15:04:05Z)");
  }
  if (mon < 1 || mon > 12 || day < 1 || day > 31 || hour > 23 || min > 59 || sec > 60) {
    return bad("field out of range");
  }
  // system_clock counts nanoseconds in int64: about 1678 to 2262.
  if (year < 1700 || year > 2200) return bad("year out of range (1700-2200)");
  size_t pos = 19;
  long long micros = 0;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    size_t n = 0;
    long long scale = 100000;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      if (n < 6) micros += (s[pos] - '0') * scale;
      scale /= 10;
      ++pos;
      ++n;
    }
    if (n == 0) return bad("empty fraction");
  }
  int offset_minutes = 0;
  if (pos < s.size() && (s[pos] == 'Z' || s[pos] == 'z')) {
    ++pos;
  } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
    int oh = 0, om = 0;
    if (!digits(s, pos + 1, 2, oh) || pos + 3 >= s.size() || s[pos + 3] != ':' ||
        !digits(s, pos + 4, 2, om) || oh > 23 || om > 59) {
      return bad("bad zone offset");
    }
    offset_minutes = (oh * 60 + om) * (s[pos] == '-' ? -1 : 1);
    pos += 6;
  } else {
    return bad("missing zone (Z or +hh:mm)");
  }
  if (pos != s.size()) return bad("trailing characters");
  tm.tm_year = year - 1900;
  tm.tm_mon = mon - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = min;
  tm.tm_sec = sec;
  const std::time_t t = timegm(&tm);
  using namespace std::chrono;
  return TimePoint(seconds(t) - minutes(offset_minutes) + microseconds(micros));
}

}  // namespace hami::k8s
