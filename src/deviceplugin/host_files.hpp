#pragma once
// Makes the host side of a ContainerPlan real before kubelet mounts it: the
// container's state directory (recreated empty, mode 0777 so any container
// user can create its state file), the read-only limits file (written whole
// and renamed into place, so a reader never sees half of it), a fresh control
// file for the node agent to rewrite (region/control_file.hpp), the
// ld.so.preload that names the library (written only when missing; vgpu-init
// normally puts it there) and the lock directory. The library itself must
// already be installed: without it every container would start unlimited.
// For a container on an MPS GPU the GPU's pipe directory must exist (its MPS
// control daemon makes it): without it the container would find no server.
//
//   auto plan = plan_container(in, cfg);
//   if (auto r = prepare_host(*plan); !r) return fail(r.error().message);

#include "common/result.hpp"
#include "deviceplugin/container_plan.hpp"

namespace hami::deviceplugin {

Result<void> prepare_host(const ContainerPlan& plan);

}  // namespace hami::deviceplugin
