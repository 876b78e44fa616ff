#pragma once
// Reads a small text file whole (/proc entries, configuration), refusing to
// read more than `max_bytes`. O_NONBLOCK, so a FIFO at the path cannot hang the
// caller. The error keeps errno (ENOENT for a missing file).
//
//   auto text = hami::read_small_file("/proc/self/stat", 64 * 1024);
//   if (!text && text.error().sys_errno == ENOENT) { ... }

#include <cstddef>
#include <string>

#include "common/result.hpp"

namespace hami {

// More than max_bytes is an error, not a silent truncation.
Result<std::string> read_small_file(const std::string& path, size_t max_bytes);

}  // namespace hami
