#pragma once
// Reads a small text file whole (/proc entries, configuration), refusing to
// read more than `max_bytes`. O_NONBLOCK, so a FIFO at the path cannot hang the
// caller. The error keeps errno (ENOENT for a missing file).
//
//   auto text = hami::read_small_file("/proc/self/stat", 64 * 1024);
//   auto ok = hami::replace_small_file(dir + "/limits", text, 0644);
//   if (!text && text.error().sys_errno == ENOENT) { ... }

#include <sys/types.h>

#include <cstddef>
#include <string>

#include "common/result.hpp"

namespace hami {

// More than max_bytes is an error, not a silent truncation.
Result<std::string> read_small_file(const std::string& path, size_t max_bytes);

// Writes `text` to a temporary file beside `path`, syncs it, sets `mode` and
// renames it over `path`: a reader sees the old file or the new one, never
// half of one (a limits file replaced by a resize, a state-directory file).
Result<void> replace_small_file(const std::string& path, const std::string& text, mode_t mode);

}  // namespace hami
