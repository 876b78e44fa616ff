// The CDI spec and annotations the device plugin produces, held against the
// Container Device Interface specification (cncf-tags/container-device-
// interface SPEC.md, v0.8.0) as a runtime's CDI library reads them: only the
// fields the specification defines, with its types; the file where runtimes
// look, under a name they load; and the annotation a runtime parses back
// into fully qualified device names.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "deviceplugin/cdi.hpp"
#include "support/temp_dir.hpp"

namespace hami::deviceplugin::cdi {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// Each object of the specification's JSON definition and its fields.
const std::map<std::string, std::set<std::string>>& spec_fields() {
  static const std::map<std::string, std::set<std::string>> f = {
      {"spec", {"cdiVersion", "kind", "annotations", "devices", "containerEdits"}},
      {"device", {"name", "annotations", "containerEdits"}},
      {"edits",
       {"env", "deviceNodes", "mounts", "hooks", "additionalGids", "additionalGIDs", "intelRdt"}},
      {"node",
       {"path", "hostPath", "type", "major", "minor", "fileMode", "permissions", "uid", "gid"}},
      {"mount", {"hostPath", "containerPath", "type", "options"}},
      {"hook", {"hookName", "path", "args", "env", "timeout"}},
  };
  return f;
}

void only_spec_fields(const json& obj, const std::string& what, const std::string& where) {
  ASSERT_TRUE(obj.is_object()) << where;
  for (const auto& [k, v] : obj.items()) {
    EXPECT_TRUE(spec_fields().at(what).contains(k))
        << where << ": '" << k << "' is no field of " << what << " in the CDI specification";
  }
}

bool strings(const json& v) {
  return v.is_array() &&
         std::all_of(v.begin(), v.end(), [](const json& s) { return s.is_string(); });
}

void edits_as_specified(const json& e, const std::string& where) {
  only_spec_fields(e, "edits", where);
  if (e.contains("env")) {
    EXPECT_TRUE(strings(e["env"])) << where;
  }
  for (const json& n : e.value("deviceNodes", json::array())) {
    only_spec_fields(n, "node", where);
    EXPECT_TRUE(n["path"].is_string()) << where;  // REQUIRED
  }
  for (const json& m : e.value("mounts", json::array())) {
    only_spec_fields(m, "mount", where);
    EXPECT_TRUE(m["hostPath"].is_string() && m["containerPath"].is_string()) << where;
    // An array of OCI mount options (the 0.1 draft's single string is gone).
    if (m.contains("options")) {
      EXPECT_TRUE(strings(m["options"])) << where;
    }
  }
  for (const json& h : e.value("hooks", json::array())) {
    only_spec_fields(h, "hook", where);
    EXPECT_TRUE(h["hookName"].is_string() && h["path"].is_string()) << where;
    if (h.contains("args")) {
      EXPECT_TRUE(strings(h["args"])) << where;
    }
  }
}

// A driver root with everything the generator can put in a spec.
json full_spec(const std::string& root) {
  for (const char* f :
       {"dev/nvidiactl", "dev/nvidia-uvm", "dev/nvidia-uvm-tools", "dev/nvidia-modeset",
        "usr/lib64/libcuda.so.570.1", "usr/lib64/libnvidia-ml.so.570.1", "usr/bin/nvidia-smi"}) {
    fs::create_directories((fs::path(root) / f).parent_path());
    std::ofstream(fs::path(root) / f) << "x";
  }
  fs::create_symlink("libcuda.so.570.1", fs::path(root) / "usr/lib64/libcuda.so.1");
  return build_spec({.gpus = {{"GPU-5a3e0000-0000-4000-8000-0000000000a1", 0},
                              {"GPU-5a3e0000-0000-4000-8000-0000000000b2", 1}},
                     .driver = find_driver_files(root),
                     .driver_root = "/run/nvidia/driver",
                     .hook_path = "/usr/bin/nvidia-cdi-hook"});
}

TEST(CdiFormat, OnlyTheSpecificationsFieldsWithItsTypes) {
  test::TempDir dir;
  const json spec = full_spec(dir.path());
  only_spec_fields(spec, "spec", "spec");
  EXPECT_TRUE(spec["cdiVersion"].is_string());
  EXPECT_TRUE(spec["kind"].is_string());
  ASSERT_TRUE(spec["devices"].is_array());
  for (const json& d : spec["devices"]) {
    only_spec_fields(d, "device", "device");
    EXPECT_TRUE(d["name"].is_string());
    edits_as_specified(d["containerEdits"], "device " + d["name"].get<std::string>());
  }
  edits_as_specified(spec["containerEdits"], "spec containerEdits");
  // Every kind of edit the generator makes is in this spec, so each was checked.
  for (const char* k : {"env", "deviceNodes", "mounts", "hooks"})
    EXPECT_TRUE(spec["containerEdits"].contains(k)) << k;
  EXPECT_TRUE(spec["devices"][0]["containerEdits"]["deviceNodes"][0].contains("hostPath"));
  EXPECT_THAT(validate_spec(spec), ::testing::IsEmpty()) << spec.dump(2);
}

// Runtimes load *.json and *.yaml from /etc/cdi and /var/run/cdi.
TEST(CdiFormat, TheFileIsWhereAndAsRuntimesLoadIt) {
  EXPECT_STREQ(kDefaultSpecDir, "/var/run/cdi");
  EXPECT_EQ(spec_file_name(), std::string(kVendor) + "-" + kClass + ".json");
  test::TempDir dir;
  auto path = write_spec(dir.path(), full_spec(dir.file("root")));
  ASSERT_TRUE(path);
  for (const auto& e : fs::directory_iterator(dir.path())) {
    const std::string ext = e.path().extension();
    if (e.path().filename() == "root") continue;
    EXPECT_EQ(e.path(), *path) << "a file a runtime might load: " << e.path();
    EXPECT_EQ(ext, ".json");
  }
  std::ifstream in(*path);
  const json back = json::parse(in, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(back.is_discarded()) << "plain JSON, as the CDI library decodes it";
}

// What a runtime's CDI library does with the container's annotations: keys
// under the prefix, values split at ',' into fully qualified names, each in
// the spec.
TEST(CdiFormat, TheAnnotationParsesBackIntoTheSpecsDevices) {
  test::TempDir dir;
  const json spec = full_spec(dir.path());
  ContainerPlan plan;
  plan.envs["NVIDIA_VISIBLE_DEVICES"] =
      std::string(spec["devices"][0]["name"]) + "," + std::string(spec["devices"][1]["name"]);
  ASSERT_TRUE(apply_device_list(plan, {.annotations = true}, kDefaultAnnotationPrefix));
  ASSERT_EQ(plan.annotations.size(), 1u);
  const auto& [key, value] = *plan.annotations.begin();
  ASSERT_EQ(key.rfind("cdi.k8s.io/", 0), 0u);
  const std::string name = key.substr(std::string("cdi.k8s.io/").size());
  EXPECT_LE(name.size(), 63u);
  std::set<std::string> in_spec;
  for (const json& d : spec["devices"])
    in_spec.insert(spec["kind"].get<std::string>() + "=" + d["name"].get<std::string>());
  size_t n = 0;
  for (size_t start = 0;; ++n) {
    const size_t comma = value.find(',', start);
    const std::string device = value.substr(start, comma - start);
    EXPECT_EQ(qualified_name_problem(device), std::nullopt) << device;
    EXPECT_TRUE(in_spec.contains(device)) << device << " is not a device of the spec";
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  EXPECT_EQ(n + 1, 2u);
}

}  // namespace
}  // namespace hami::deviceplugin::cdi
