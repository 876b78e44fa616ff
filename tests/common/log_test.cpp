// One event, one line: what a message carries cannot forge a line of its own.
#include "common/log.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "support/temp_dir.hpp"

namespace hami::log {
namespace {

// What the logger writes to stderr while `fn` runs.
template <class Fn>
std::string captured(Fn&& fn) {
  test::TempDir dir;
  const std::string path = dir.file("stderr");
  const int file = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  const int saved = ::dup(2);
  ::dup2(file, 2);
  fn();
  ::dup2(saved, 2);
  ::close(saved);
  ::close(file);
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(Log, ControlCharactersInAMessageAreEscaped) {
  set_level(Level::kWarn);
  set_component("test");
  const std::string name = "a.cache\n[hami-node-agent pid 1] ERROR: forged\x1b[2J\tend";
  const std::string out = captured([&] { warn("%s: not a state file", name.c_str()); });
  EXPECT_EQ(out.find('\n'), out.size() - 1) << "one line: " << out;
  EXPECT_NE(out.find("a.cache\\n[hami-node-agent pid 1] ERROR: forged\\x1b[2J\\tend: not a state "
                     "file\n"),
            std::string::npos)
      << out;
}

}  // namespace
}  // namespace hami::log
