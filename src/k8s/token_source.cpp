#include "k8s/token_source.hpp"

#include <sys/stat.h>

#include <cerrno>

#include "common/log.hpp"
#include "common/small_file.hpp"
#include "common/text.hpp"

namespace hami::k8s {

std::shared_ptr<TokenSource> TokenSource::fixed(std::string token) {
  std::shared_ptr<TokenSource> s(new TokenSource());
  s->token_ = std::move(token);
  s->have_token_ = true;
  return s;
}

std::shared_ptr<TokenSource> TokenSource::from_file(std::string path) {
  std::shared_ptr<TokenSource> s(new TokenSource());
  s->path_ = std::move(path);
  return s;
}

hami::Result<std::string> TokenSource::token() {
  std::lock_guard lock(mu_);
  if (path_.empty()) return token_;
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    if (have_token_) return token_;
    return hami::Error::from_errno("token file " + path_);
  }
  if (have_token_ && st.st_dev == dev_ && st.st_ino == ino_ && st.st_size == size_ &&
      st.st_mtim.tv_sec == mtime_.tv_sec && st.st_mtim.tv_nsec == mtime_.tv_nsec) {
    return token_;
  }
  auto text = read_small_file(path_, 64 * 1024);
  if (!text) {
    if (have_token_) {
      log::warn("token file %s: %s; keeping the previous token", path_.c_str(),
                text.error().message.c_str());
      return token_;
    }
    return hami::Error{"token file " + text.error().message, text.error().sys_errno};
  }
  std::string fresh(hami::trim(*text));
  if (fresh.empty()) {
    if (have_token_) return token_;  // caught between truncate and write
    return hami::Error{"token file " + path_ + ": empty"};
  }
  token_ = std::move(fresh);
  have_token_ = true;
  dev_ = st.st_dev;
  ino_ = st.st_ino;
  size_ = st.st_size;
  mtime_ = st.st_mtim;
  return token_;
}

}  // namespace hami::k8s
