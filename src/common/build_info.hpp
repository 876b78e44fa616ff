#pragma once
// What build a daemon is, for upstream's hami_build_info metric (same name
// and labels: version, revision, build_date, go_version, compiler, platform,
// value 1, no zone label) so dashboards that join on it keep working.
// Revision and date are taken when CMake configures (git describe of the
// source tree, SOURCE_DATE_EPOCH when set); go_version is "none" in a C++
// build, compiler names GCC and its version.
//
//   hami::PrometheusText out;
//   hami::render_build_info(out);   // before any set_const_labels
//   out.set_const_labels({{"zone", "vGPU"}});

#include <string_view>

#include "common/prometheus_text.hpp"

namespace hami {

struct BuildInfo {
  std::string_view version;
  std::string_view revision;
  std::string_view build_date;
  std::string_view compiler;
  std::string_view platform;
};

const BuildInfo& build_info();

// The hami_build_info family with one sample; `out` must have no const
// labels yet (upstream registers it outside the zone-wrapped registry).
void render_build_info(PrometheusText& out);

}  // namespace hami
