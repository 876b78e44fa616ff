#pragma once
// Left-aligned text columns for terminal output, widths fitted to the content.
//
//   hami::cli::Table t({"SLOT", "PID"});
//   t.add({"0", "620"});
//   std::cout << t.render("  ");   // each line prefixed by the indent

#include <string>
#include <vector>

namespace hami::cli {

class Table {
 public:
  explicit Table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string render(const std::string& indent) const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace hami::cli
