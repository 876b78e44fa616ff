#include "common/build_info.hpp"

#ifndef HAMI_VERSION
#define HAMI_VERSION "unknown"
#endif
#ifndef HAMI_REVISION
#define HAMI_REVISION "unknown"
#endif
#ifndef HAMI_BUILD_DATE
#define HAMI_BUILD_DATE "unknown"
#endif

namespace hami {
namespace {

#define HAMI_STR2(x) #x
#define HAMI_STR(x) HAMI_STR2(x)

constexpr const char* kCompiler =
#if defined(__clang__)
    "clang-" HAMI_STR(__clang_major__) "." HAMI_STR(__clang_minor__) "." HAMI_STR(
        __clang_patchlevel__);
#elif defined(__GNUC__)
    "gcc-" HAMI_STR(__GNUC__) "." HAMI_STR(__GNUC_MINOR__) "." HAMI_STR(__GNUC_PATCHLEVEL__);
#else
    "unknown";
#endif

// Go's GOOS/GOARCH spelling, as upstream's platform label has it.
constexpr const char* kPlatform =
#if defined(__x86_64__)
    "linux/amd64";
#elif defined(__aarch64__)
    "linux/arm64";
#else
    "linux/unknown";
#endif

}  // namespace

const BuildInfo& build_info() {
  static const BuildInfo info{HAMI_VERSION, HAMI_REVISION, HAMI_BUILD_DATE, kCompiler, kPlatform};
  return info;
}

void render_build_info(PrometheusText& out) {
  const BuildInfo& b = build_info();
  out.family("hami_build_info",
             "hami build metadata exposed as labels with a constant value of 1.");
  out.sample("hami_build_info",
             {{"version", b.version},
              {"revision", b.revision},
              {"build_date", b.build_date},
              {"go_version", "none"},
              {"compiler", b.compiler},
              {"platform", b.platform}},
             uint64_t{1});
}

}  // namespace hami
