#pragma once
// Reading cuda-client's output in tests: one line per operation,
// "op=<name> rc=<CUresult> key=value ...".
//
//   const Line l = find_op(out, "alloc:768m");
//   EXPECT_EQ(num(l, "rc"), 2u);

#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace hami::test {

using Line = std::map<std::string, std::string>;

inline std::vector<Line> parse_lines(const std::string& out) {
  std::vector<Line> lines;
  std::istringstream in(out);
  std::string text;
  while (std::getline(in, text)) {
    Line l;
    std::istringstream words(text);
    std::string w;
    while (words >> w) {
      const size_t eq = w.find('=');
      if (eq != std::string::npos) l[w.substr(0, eq)] = w.substr(eq + 1);
    }
    if (!l.empty()) lines.push_back(l);
  }
  return lines;
}

// The n-th line for operation `op` (exact text as given on the command line).
inline Line find_op(const std::string& out, const std::string& op, int nth = 0) {
  for (const Line& l : parse_lines(out)) {
    auto it = l.find("op");
    if (it != l.end() && it->second == op && nth-- == 0) return l;
  }
  ADD_FAILURE() << "no line for op " << op << " in:\n" << out;
  return {};
}

inline uint64_t num(const Line& l, const std::string& key) {
  auto it = l.find(key);
  return it == l.end() ? ~0ull : std::stoull(it->second);
}

// The CUresult of the n-th `op`, or -999 when there is none.
inline int rc_of(const std::string& out, const std::string& op, int nth = 0) {
  const Line l = find_op(out, op, nth);
  return l.count("rc") ? std::stoi(l.at("rc")) : -999;
}

}  // namespace hami::test
