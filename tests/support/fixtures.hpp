#pragma once
// Access to the files under tests/fixtures/, decompressed.
//
//   auto bytes = hami::test::read_gzip_fixture("hami-core-v1.2-one-process.cache.gz");
//   hami::test::write_file(dir.file("x.cache"), bytes);

#include <cstddef>
#include <string>
#include <vector>

namespace hami::test {

// Path of a file in tests/fixtures (HAMI_FIXTURE_DIR is set by CMake).
std::string fixture_path(const std::string& name);
std::vector<std::byte> read_gzip_fixture(const std::string& name);
std::vector<std::byte> read_file(const std::string& path);
void write_file(const std::string& path, const std::vector<std::byte>& bytes);

}  // namespace hami::test
