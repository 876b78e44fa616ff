#pragma once
// Small readers the tests share: a file's whole text, and one annotation of
// an API object as a test prints it ("<no object>" when the object is
// missing, "<absent>" when the annotation is).
//
//   EXPECT_EQ(test::annotation(api.get("pods", "default", "p"), "hami.io/bind-phase"), "success");
//   EXPECT_THAT(test::slurp(dir.file("limits")), HasSubstr("CUDA_DEVICE_MEMORY_LIMIT_0="));

#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

namespace hami::test {

inline std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

inline std::string annotation(const std::optional<nlohmann::json>& obj, const std::string& key) {
  if (!obj) return "<no object>";
  const nlohmann::json an = (*obj)["metadata"].value("annotations", nlohmann::json::object());
  return an.contains(key) ? an[key].get<std::string>() : "<absent>";
}

}  // namespace hami::test
