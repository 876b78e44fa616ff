#include "monitor/trusted_record.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "common/kv_text.hpp"
#include "common/size_parse.hpp"
#include "common/unique_fd.hpp"

namespace hami::monitor {
namespace {

constexpr size_t kMaxRecordSize = 64 * 1024;  // as libvgpu.so reads the same file
constexpr int kMaxDevices = region::kMaxDevices;

std::string indexed(const char* key, int i) {
  return std::string(key) + "_" + std::to_string(i);
}

Result<std::optional<uint64_t>> mps_thread_percentage(const KvText& kv) {
  auto m = kv.find(kMpsThreadKey);
  if (!m) return std::optional<uint64_t>();
  auto v = parse_percent(*m);
  if (!v || *v == 0) {
    return Error{std::string(kMpsThreadKey) + "=" + m->substr(0, 100) +
                 ": not a percentage from 1 to 100"};
  }
  return std::optional<uint64_t>(*v);
}

}  // namespace

Result<std::optional<uint64_t>> parse_mps_thread_percentage(const std::string& text) {
  return mps_thread_percentage(parse_kv_text(text));
}

Result<TrustedRecord> parse_trusted_record(const std::string& text, const std::string& path) {
  const KvText kv = parse_kv_text(text);
  if (!kv.malformed.empty()) {
    return Error{path + ":" + std::to_string(kv.malformed[0].line) + ": not KEY=VALUE"};
  }
  TrustedRecord r;
  r.path = path;
  auto bad = [&](const std::string& key, const std::string& value, const std::string& why) {
    return Error{path + ": " + key + "=" + value.substr(0, 100) + ": " + why};
  };
  if (auto p = kv.find("CUDA_TASK_PRIORITY")) {
    if (*p != "0" && *p != "1") return bad("CUDA_TASK_PRIORITY", *p, "not 0 or 1");
    r.priority = (*p)[0] - '0';
  }
  std::optional<uint64_t> global_mem;
  if (auto m = kv.find("CUDA_DEVICE_MEMORY_LIMIT")) {
    auto v = parse_size(*m);
    if (!v) return bad("CUDA_DEVICE_MEMORY_LIMIT", *m, v.error().message);
    global_mem = *v;
  }
  std::optional<uint64_t> global_sm;
  if (auto m = kv.find("CUDA_DEVICE_SM_LIMIT")) {
    auto v = parse_percent(*m);
    if (!v) return bad("CUDA_DEVICE_SM_LIMIT", *m, v.error().message);
    global_sm = *v;
  }
  for (int d = 0; d < kMaxDevices; ++d) {
    r.memory_limit[d] = global_mem.value_or(0);
    if (auto m = kv.find(indexed("CUDA_DEVICE_MEMORY_LIMIT", d))) {
      auto v = parse_size(*m);
      if (!v) return bad(indexed("CUDA_DEVICE_MEMORY_LIMIT", d), *m, v.error().message);
      r.memory_limit[d] = *v;
    }
    r.sm_limit[d] = global_sm.value_or(100);
    if (auto m = kv.find(indexed("CUDA_DEVICE_SM_LIMIT", d))) {
      auto v = parse_percent(*m);
      if (!v) return bad(indexed("CUDA_DEVICE_SM_LIMIT", d), *m, v.error().message);
      r.sm_limit[d] = *v;
    }
  }
  for (int d = 0; d < kMaxDevices; ++d) {
    auto u = kv.find(indexed("VGPU_DEVICE_UUID", d));
    if (!u) break;
    if (u->empty() || u->size() >= region::kUuidSize) {
      return bad(indexed("VGPU_DEVICE_UUID", d), *u, "not a GPU UUID");
    }
    r.gpu_uuids.push_back(*u);
  }
  auto mps = mps_thread_percentage(kv);
  if (!mps) return Error{path + ": " + mps.error().message};
  r.mps_thread_percentage = *mps;
  if (auto f = kv.find("CUDA_DEVICE_MEMORY_SHARED_CACHE")) {
    const size_t slash = f->rfind('/');
    const std::string base = slash == std::string::npos ? *f : f->substr(slash + 1);
    if (base.empty() || base == "." || base == "..") {
      return bad("CUDA_DEVICE_MEMORY_SHARED_CACHE", *f, "names no file");
    }
    r.state_file_name = base;
  }
  return r;
}

Result<std::optional<TrustedRecord>> read_trusted_record(const std::string& path) {
  UniqueFd fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY)};
  if (fd.get() < 0) {
    if (errno == ENOENT) return std::optional<TrustedRecord>();
    if (errno == ELOOP) return Error{path + ": a symbolic link; not trusted"};
    return Error::from_errno(path + ": cannot open");
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return Error::from_errno(path + ": cannot stat");
  if (!S_ISREG(st.st_mode)) return Error{path + ": not a regular file; not trusted"};
  if (st.st_uid != 0 && st.st_uid != ::geteuid()) {
    return Error{path + ": owned by uid " + std::to_string(st.st_uid) +
                 ", not by root or this agent; not trusted"};
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return Error{path + ": writable by group or others; not trusted"};
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxRecordSize) {
    return Error{path + ": larger than 64 KiB, not a limits file"};
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n =
        ::pread(fd.get(), text.data() + done, text.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::from_errno(path + ": cannot read");
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  text.resize(done);
  auto rec = parse_trusted_record(text, path);
  if (!rec) return rec.error();
  return std::optional<TrustedRecord>(std::move(*rec));
}

}  // namespace hami::monitor
