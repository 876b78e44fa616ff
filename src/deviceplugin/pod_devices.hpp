#pragma once
// The scheduler's device decision for a pod (hami.io/vgpu-devices-to-allocate
// and hami.io/vgpu-devices-allocated) as the device plugin uses it. The codec
// itself is src/protocol/device_codec.hpp, shared with the scheduler extender so the
// two sides of the protocol cannot drift; this header adds what only the
// plugin needs.
//
//   auto pd = hami::deviceplugin::decode_pod_devices(annotation);
//   if (!pd) return fail(pd.error().message);   // says which container/device and why
//   if (!hami::deviceplugin::any_devices(*pd)) ...  // every container served

#include "protocol/device_codec.hpp"

namespace hami::deviceplugin {

using protocol::ContainerDevice;
using protocol::ContainerDevices;
using protocol::decode_pod_devices;
using protocol::encode_pod_devices;
using protocol::kMaxPodDevicesText;
using protocol::PodDevices;

// Whether any container still has devices (the to-allocate copy is emptied as
// containers are served).
bool any_devices(const PodDevices& devices);

}  // namespace hami::deviceplugin
