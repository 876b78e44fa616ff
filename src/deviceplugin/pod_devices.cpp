#include "deviceplugin/pod_devices.hpp"

namespace hami::deviceplugin {

bool any_devices(const PodDevices& devices) {
  for (const ContainerDevices& c : devices) {
    if (!c.empty()) return true;
  }
  return false;
}

}  // namespace hami::deviceplugin
