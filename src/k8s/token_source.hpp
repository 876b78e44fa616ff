#pragma once
// The bearer token for API requests: a fixed string, or a file re-read whenever
// it changes. Bound service-account tokens are rotated by the kubelet (about
// hourly, by an atomic symlink swap), so a daemon that read its token once would
// start failing with 401 after the old one expires. Checking the file costs one
// stat(2) per request. Safe to share between threads.
//
//   auto tokens = hami::k8s::TokenSource::from_file("/var/run/secrets/.../token");
//   auto t = tokens->token();   // Result<std::string>; "" for a source with no token

#include <sys/types.h>

#include <ctime>
#include <memory>
#include <mutex>
#include <string>

#include "common/result.hpp"

namespace hami::k8s {

class TokenSource {
 public:
  static std::shared_ptr<TokenSource> fixed(std::string token);
  static std::shared_ptr<TokenSource> from_file(std::string path);

  // The current token. A file that cannot be read any more yields the last token
  // read (a rotation in progress must not fail requests); an error only when no
  // token was ever read.
  hami::Result<std::string> token();
  const std::string& path() const { return path_; }

 private:
  TokenSource() = default;

  std::mutex mu_;
  std::string path_;  // empty for a fixed token
  std::string token_;
  bool have_token_ = false;
  // What the file looked like when token_ was read.
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  off_t size_ = -1;
  timespec mtime_{};
};

}  // namespace hami::k8s
