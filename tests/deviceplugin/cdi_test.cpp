// The CDI side of the device plugin on plain data and a fake driver root:
// the device list strategies, the naming rules, the driver files found, the
// spec built and checked against the specification's rules, its atomic write,
// and what a planned container's Allocate answer becomes per strategy.
#include "deviceplugin/cdi.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/temp_dir.hpp"

namespace hami::deviceplugin::cdi {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::MatchesRegex;

constexpr const char* kA = "GPU-5a3e0000-0000-4000-8000-0000000000a1";
constexpr const char* kB = "GPU-5a3e0000-0000-4000-8000-0000000000b2";

void touch(const fs::path& p) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << "x";
}

std::string all(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v)
    out += s + "\n";
  return out;
}

TEST(CdiStrategy, ParsesNvidiasWordsAndRefusesTheRest) {
  auto s = parse_strategy("envvar");
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->envvar);
  EXPECT_FALSE(s->cdi());
  s = parse_strategy("cdi-annotations");
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->annotations && !s->cri && !s->envvar);
  s = parse_strategy("envvar,cdi-cri");
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->envvar && s->cri && !s->annotations);

  auto bad = parse_strategy("volume-mounts");
  ASSERT_FALSE(bad);
  EXPECT_THAT(bad.error().message, HasSubstr("volume-mounts: not supported by this build"));
  bad = parse_strategy("envvar,cdi");
  ASSERT_FALSE(bad);
  EXPECT_THAT(bad.error().message, HasSubstr("unknown strategy 'cdi'"));
  EXPECT_FALSE(parse_strategy(""));
  EXPECT_FALSE(parse_strategy("envvar,"));
}

// The specification's own examples of kinds.
TEST(CdiNames, KindsAsTheSpecificationGivesThem) {
  EXPECT_EQ(kind_problem("vendor.com/foo"), std::nullopt);
  EXPECT_EQ(kind_problem("foo.bar.baz/foo-bar123.B_az"), std::nullopt);
  EXPECT_EQ(kind_problem(kind()), std::nullopt);
  EXPECT_EQ(kind(), "k8s.device-plugin.nvidia.com/gpu");
  for (const char* bad : {"foo", "vendor.com/foo/", "vendor.com/foo/bar", "/gpu", "vendor.com/",
                          "1vendor.com/gpu", "vendor.com/-gpu", "vendor.com/gpu-"}) {
    EXPECT_NE(kind_problem(bad), std::nullopt) << bad;
  }
  EXPECT_NE(kind_problem("vendor.com/" + std::string(64, 'a')), std::nullopt);
}

TEST(CdiNames, DeviceAndQualifiedNames) {
  for (const char* good : {kA, "0", "all", "MIG-1f2e", "a:b", "a_b.c"})
    EXPECT_EQ(device_name_problem(good), std::nullopt) << good;
  for (const char* bad : {"", "-a", "a-", "a/b", "a=b", "a b", "GPU-1,GPU-2"})
    EXPECT_NE(device_name_problem(bad), std::nullopt) << bad;
  EXPECT_EQ(qualified_name(kA), std::string("k8s.device-plugin.nvidia.com/gpu=") + kA);
  EXPECT_EQ(qualified_name_problem(qualified_name(kA)), std::nullopt);
  EXPECT_NE(qualified_name_problem(kA), std::nullopt);
  EXPECT_NE(qualified_name_problem("vendor.com=gpu0"), std::nullopt);
  EXPECT_NE(qualified_name_problem("vendor.com/gpu="), std::nullopt);
}

TEST(CdiNames, AnnotationKeysAndPrefixes) {
  auto key = annotation_key("cdi.k8s.io/", kAnnotationPlugin, "0123abcd");
  ASSERT_TRUE(key);
  EXPECT_EQ(*key, "cdi.k8s.io/nvidia-device-plugin_0123abcd");
  // '/' in the ID becomes '_', as CDI's UpdateAnnotations makes it.
  EXPECT_EQ(*annotation_key("cdi.k8s.io/", "p", "a/b"), "cdi.k8s.io/p_a_b");
  // The name part is at most 63 characters: "nvidia-device-plugin_" (21) + 43 is one too many.
  EXPECT_FALSE(annotation_key("cdi.k8s.io/", kAnnotationPlugin, std::string(43, 'a')));
  EXPECT_TRUE(annotation_key("cdi.k8s.io/", kAnnotationPlugin, std::string(42, 'a')));
  EXPECT_FALSE(annotation_key("cdi.k8s.io/", kAnnotationPlugin, "a!b"));
  EXPECT_FALSE(annotation_key("cdi.k8s.io/", kAnnotationPlugin, "ab-"));

  EXPECT_TRUE(check_annotation_prefix("cdi.k8s.io/"));
  EXPECT_TRUE(check_annotation_prefix("nvidia.cdi.k8s.io/"));
  for (const char* bad : {"cdi.k8s.io", "", "/", "CDI.k8s.io/", "a..b/", "-a.io/", "a_b.io/"}) {
    auto r = check_annotation_prefix(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_THAT(r.error().message, HasSubstr("--cdi-annotation-prefix")) << bad;
  }
}

// A driver root laid out as Debian's driver packages lay it out, with
// /lib a link to usr/lib (merged /usr).
class DriverRoot : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_.file("root");
    const fs::path lib = fs::path(root_) / "usr/lib/x86_64-linux-gnu";
    touch(fs::path(root_) / "dev/nvidiactl");
    touch(fs::path(root_) / "dev/nvidia-uvm");
    touch(fs::path(root_) / "dev/nvidia0");
    touch(lib / "libcuda.so.570.133.20");
    fs::create_symlink("libcuda.so.570.133.20", lib / "libcuda.so.1");
    fs::create_symlink("libcuda.so.1", lib / "libcuda.so");  // the dev link: not mounted
    touch(lib / "libnvidia-ml.so.570.133.20");
    // An absolute link resolves inside the root, not on the plugin's own /.
    fs::create_symlink("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.570.133.20",
                       lib / "libnvidia-ml.so.1");
    fs::create_symlink("libmissing.so.1", lib / "libnvidia-cfg.so.1");  // dangling
    touch(lib / "libfoo.so.1");                                         // not the driver's
    fs::create_symlink("usr/lib", fs::path(root_) / "lib");
    touch(fs::path(root_) / "usr/bin/nvidia-smi");
  }
  test::TempDir dir_;
  std::string root_;
};

TEST_F(DriverRoot, FindsNodesLibrariesLinksAndTools) {
  const DriverFiles f = find_driver_files(root_);
  EXPECT_THAT(f.device_nodes, ElementsAre("/dev/nvidiactl", "/dev/nvidia-uvm"));
  const std::string d = "/usr/lib/x86_64-linux-gnu/";
  EXPECT_THAT(
      f.libraries,
      ElementsAre(DriverFile{d + "libcuda.so.1", d + "libcuda.so.570.133.20"},
                  DriverFile{d + "libcuda.so.570.133.20", d + "libcuda.so.570.133.20"},
                  DriverFile{d + "libnvidia-ml.so.1", d + "libnvidia-ml.so.570.133.20"},
                  DriverFile{d + "libnvidia-ml.so.570.133.20", d + "libnvidia-ml.so.570.133.20"}));
  // Read once although /lib/x86_64-linux-gnu is the same directory.
  EXPECT_THAT(f.library_dirs, ElementsAre("/usr/lib/x86_64-linux-gnu"));
  EXPECT_THAT(f.binaries, ElementsAre(DriverFile{"/usr/bin/nvidia-smi", "/usr/bin/nvidia-smi"}));
}

TEST_F(DriverRoot, MissingRootFindsNothing) {
  const DriverFiles f = find_driver_files(dir_.file("nowhere"));
  EXPECT_THAT(f.device_nodes, IsEmpty());
  EXPECT_THAT(f.libraries, IsEmpty());
  EXPECT_THAT(f.binaries, IsEmpty());
}

TEST_F(DriverRoot, SpecOnTheHostRoot) {
  SpecInput in{.gpus = {{kA, 0}, {kB, 3}}, .driver = find_driver_files(root_)};
  const json spec = build_spec(in);
  EXPECT_THAT(all(validate_spec(spec)), IsEmpty()) << spec.dump(2);
  // Nothing of 0.4.0 or later: runtimes with older CDI libraries read it.
  EXPECT_EQ(spec["cdiVersion"], "0.3.0");
  EXPECT_EQ(spec["kind"], "k8s.device-plugin.nvidia.com/gpu");
  ASSERT_EQ(spec["devices"].size(), 2u);
  EXPECT_EQ(spec["devices"][0]["name"], kA);
  EXPECT_EQ(spec["devices"][0]["containerEdits"],
            json::parse(R"({"deviceNodes":[{"path":"/dev/nvidia0"}]})"));
  EXPECT_EQ(spec["devices"][1]["containerEdits"]["deviceNodes"][0]["path"], "/dev/nvidia3");
  const json& e = spec["containerEdits"];
  EXPECT_EQ(e["env"], json::array({"NVIDIA_VISIBLE_DEVICES=void"}));
  EXPECT_EQ(e["deviceNodes"],
            json::parse(R"([{"path":"/dev/nvidiactl"},{"path":"/dev/nvidia-uvm"}])"));
  ASSERT_EQ(e["mounts"].size(), 5u);
  EXPECT_EQ(e["mounts"][0],
            json::parse(R"({"hostPath":"/usr/lib/x86_64-linux-gnu/libcuda.so.570.133.20",
                            "containerPath":"/usr/lib/x86_64-linux-gnu/libcuda.so.1",
                            "options":["ro","nosuid","nodev","bind"]})"));
  EXPECT_EQ(e["mounts"][4]["containerPath"], "/usr/bin/nvidia-smi");
  EXPECT_FALSE(e.contains("hooks")) << "no hook without --nvidia-cdi-hook-path";
}

TEST_F(DriverRoot, SpecOfADriverContainersRootWithTheHook) {
  SpecInput in{.gpus = {{kA, 0}},
               .driver = find_driver_files(root_),
               .driver_root = "/run/nvidia/driver/",
               .hook_path = "/usr/local/nvidia/toolkit/nvidia-cdi-hook"};
  const json spec = build_spec(in);
  EXPECT_THAT(all(validate_spec(spec)), IsEmpty()) << spec.dump(2);
  // Device nodes with a hostPath need 0.5.0.
  EXPECT_EQ(spec["cdiVersion"], "0.5.0");
  EXPECT_EQ(spec["devices"][0]["containerEdits"]["deviceNodes"][0],
            json::parse(R"({"path":"/dev/nvidia0","hostPath":"/run/nvidia/driver/dev/nvidia0"})"));
  const json& e = spec["containerEdits"];
  EXPECT_EQ(e["mounts"][0]["hostPath"],
            "/run/nvidia/driver/usr/lib/x86_64-linux-gnu/libcuda.so.570.133.20");
  EXPECT_EQ(e["mounts"][0]["containerPath"], "/usr/lib/x86_64-linux-gnu/libcuda.so.1");
  EXPECT_EQ(e["hooks"], json::parse(R"([{"hookName":"createContainer",
      "path":"/usr/local/nvidia/toolkit/nvidia-cdi-hook",
      "args":["nvidia-cdi-hook","update-ldcache","--folder","/usr/lib/x86_64-linux-gnu"]}])"));
}

// validate_spec itself: a valid spec, then one rule broken at a time.
TEST(CdiValidate, EachRuleBrokenIsNamed) {
  const json good = json::parse(R"({"cdiVersion":"0.3.0","kind":"vendor.com/gpu",
      "devices":[{"name":"gpu0","containerEdits":{"deviceNodes":[{"path":"/dev/g0"}]}}],
      "containerEdits":{"env":["A=1"],"mounts":[{"hostPath":"/a","containerPath":"/b"}],
        "hooks":[{"hookName":"createContainer","path":"/bin/h"}]}})");
  ASSERT_THAT(all(validate_spec(good)), IsEmpty());

  struct Case {
    const char* pointer;
    json value;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"/cdiVersion", "0.3", "not a semantic version"},
      {"/cdiVersion", "0.2.0", "not a released CDI version"},
      {"/cdiVersion", "1.0.0", "not a released CDI version"},
      {"/kind", "gpu", "not of the form vendor/class"},
      {"/kind", "vendor.com/gpu/x", "more than one '/'"},
      {"/devices", json::array(), "at least one device"},
      {"/devices/0/name", "-gpu0", "does not start and end"},
      {"/devices/0/containerEdits/deviceNodes/0/path", "dev/g0", "no absolute path"},
      {"/devices/0/containerEdits/deviceNodes/0/permissions", "rwx", "not of r, w, m"},
      {"/containerEdits/env/0", "A", "not VAR=value"},
      {"/containerEdits/mounts/0/containerPath", "b", "absolute hostPath or containerPath"},
      {"/containerEdits/hooks/0/hookName", "onStart", "no OCI hook name"},
      {"/containerEdits/hooks/0/path", "h", "not absolute"},
      {"/containerEdits/hooks/0/timeout", 0, "not above 0"},
  };
  for (const Case& c : cases) {
    json bad = good;
    bad[json::json_pointer(c.pointer)] = c.value;
    EXPECT_THAT(all(validate_spec(bad)), HasSubstr(c.says)) << c.pointer << " = " << c.value;
  }
  json twice = good;
  twice["devices"].push_back(good["devices"][0]);
  EXPECT_THAT(all(validate_spec(twice)), HasSubstr("used twice"));
  // A hostPath (0.5.0) or a name starting with a digit (0.5.0) under a 0.3.0 version.
  json needs = good;
  needs["devices"][0]["containerEdits"]["deviceNodes"][0]["hostPath"] = "/dev/g0";
  EXPECT_EQ(min_version(needs), "0.5.0");
  EXPECT_THAT(all(validate_spec(needs)), HasSubstr("below 0.5.0"));
  needs = good;
  needs["devices"][0]["name"] = "0";
  EXPECT_THAT(all(validate_spec(needs)), HasSubstr("below 0.5.0"));
  needs["cdiVersion"] = "0.5.0";
  EXPECT_THAT(all(validate_spec(needs)), IsEmpty());
  needs = good;
  needs["containerEdits"]["mounts"][0]["type"] = "none";
  EXPECT_EQ(min_version(needs), "0.4.0");
}

TEST(CdiWrite, AtomicReplaceUnderTheConventionalName) {
  test::TempDir dir;
  const std::string specs = dir.file("run/cdi");  // created
  json spec = build_spec({.gpus = {{kA, 0}}});
  auto path = write_spec(specs, spec);
  ASSERT_TRUE(path) << path.error().message;
  EXPECT_EQ(*path, specs + "/k8s.device-plugin.nvidia.com-gpu.json");
  std::ifstream in(*path);
  EXPECT_EQ(json::parse(in), spec);
  struct stat st {};
  ASSERT_EQ(::stat(path->c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  const ino_t first = st.st_ino;

  spec["devices"].push_back({{"name", kB}, {"containerEdits", json::object()}});
  ASSERT_TRUE(write_spec(specs, spec));
  ASSERT_EQ(::stat(path->c_str(), &st), 0);
  EXPECT_NE(st.st_ino, first) << "replaced in place, not renamed over";
  std::ifstream again(*path);
  EXPECT_EQ(json::parse(again)["devices"].size(), 2u);
  // Only the spec is left: no temporary file a runtime could read.
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(specs)) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 1u);

  std::ofstream(dir.file("file")) << "x";
  auto bad = write_spec(dir.file("file") + "/cdi", spec);
  ASSERT_FALSE(bad);
  EXPECT_THAT(bad.error().message, HasSubstr("cannot create the CDI spec directory"));
}

ContainerPlan planned() {
  ContainerPlan p;
  p.envs["NVIDIA_VISIBLE_DEVICES"] = std::string(kA) + "," + kB;
  p.envs["CUDA_DEVICE_MEMORY_LIMIT_0"] = "3000m";
  return p;
}

TEST(CdiAllocate, EachStrategyAnswersItsWay) {
  const std::string names = qualified_name(kA) + "," + qualified_name(kB);

  ContainerPlan env = planned();
  ASSERT_TRUE(apply_device_list(env, {.envvar = true}, kDefaultAnnotationPrefix));
  EXPECT_EQ(env.envs, planned().envs);
  EXPECT_THAT(env.annotations, IsEmpty());
  EXPECT_THAT(env.cdi_devices, IsEmpty());

  ContainerPlan ann = planned();
  ASSERT_TRUE(apply_device_list(ann, {.annotations = true}, "nvidia.cdi.k8s.io/"));
  ASSERT_EQ(ann.annotations.size(), 1u);
  EXPECT_THAT(ann.annotations.begin()->first,
              MatchesRegex("nvidia\\.cdi\\.k8s\\.io/nvidia-device-plugin_[0-9a-f]{32}"));
  EXPECT_EQ(ann.annotations.begin()->second, names);
  EXPECT_EQ(ann.envs.at("NVIDIA_VISIBLE_DEVICES"), "void");
  EXPECT_EQ(ann.envs.at("CUDA_DEVICE_MEMORY_LIMIT_0"), "3000m");
  EXPECT_THAT(ann.cdi_devices, IsEmpty());
  // Each container's key is its own.
  ContainerPlan ann2 = planned();
  ASSERT_TRUE(apply_device_list(ann2, {.annotations = true}, kDefaultAnnotationPrefix));
  EXPECT_NE(ann2.annotations.begin()->first.substr(11), ann.annotations.begin()->first.substr(18));

  ContainerPlan cri = planned();
  ASSERT_TRUE(apply_device_list(cri, {.envvar = true, .cri = true}, kDefaultAnnotationPrefix));
  EXPECT_THAT(cri.cdi_devices, ElementsAre(qualified_name(kA), qualified_name(kB)));
  EXPECT_EQ(cri.envs.at("NVIDIA_VISIBLE_DEVICES"), planned().envs.at("NVIDIA_VISIBLE_DEVICES"));
  EXPECT_THAT(cri.annotations, IsEmpty());

  ContainerPlan none;
  auto r = apply_device_list(none, {.cri = true}, kDefaultAnnotationPrefix);
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message, HasSubstr("no GPUs"));
  ContainerPlan odd;
  odd.envs["NVIDIA_VISIBLE_DEVICES"] = "GPU a";
  EXPECT_FALSE(apply_device_list(odd, {.cri = true}, kDefaultAnnotationPrefix));
}

}  // namespace
}  // namespace hami::deviceplugin::cdi
