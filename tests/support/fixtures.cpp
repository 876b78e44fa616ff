#include "support/fixtures.hpp"

#include <zlib.h>

#include <fstream>
#include <iterator>
#include <stdexcept>

namespace hami::test {

std::string fixture_path(const std::string& name) {
  return std::string(HAMI_FIXTURE_DIR) + "/" + name;
}

std::vector<std::byte> read_gzip_fixture(const std::string& name) {
  const std::string path = fixture_path(name);
  gzFile gz = gzopen(path.c_str(), "rb");
  if (gz == nullptr) throw std::runtime_error("cannot open fixture " + path);
  std::vector<std::byte> out;
  char buf[65536];
  int n;
  while ((n = gzread(gz, buf, sizeof buf)) > 0) {
    const auto* b = reinterpret_cast<const std::byte*>(buf);
    out.insert(out.end(), b, b + n);
  }
  gzclose(gz);
  if (n < 0) throw std::runtime_error("corrupt fixture " + path);
  return out;
}

std::vector<std::byte> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(chars.size());
  for (size_t i = 0; i < chars.size(); ++i)
    out[i] = static_cast<std::byte>(chars[i]);
  return out;
}

void write_file(const std::string& path, const std::vector<std::byte>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw std::runtime_error("cannot write " + path);
}

}  // namespace hami::test
