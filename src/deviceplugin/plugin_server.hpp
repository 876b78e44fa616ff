#pragma once
// Our DevicePlugin gRPC server on its unix socket in kubelet's device-plugins
// directory. kubelet deletes every socket there when it restarts, so the
// daemon stops and starts this server again (a fresh service each time) on a
// new socket file.
//
//   PluginServer server(state, cfg, handlers);
//   if (auto r = server.start("/var/lib/kubelet/device-plugins/nvidia-gpu.sock"); !r) ...
//   server.stop();   // ends ListAndWatch streams, then the server; removes the socket

#include <memory>
#include <string>

#include "common/result.hpp"
#include "deviceplugin/plugin_service.hpp"

namespace grpc {
class Server;
}

namespace hami::deviceplugin {

class PluginServer {
 public:
  PluginServer(DeviceState& state, const PluginConfig& cfg, PluginHandlers handlers);
  ~PluginServer();
  PluginServer(const PluginServer&) = delete;
  PluginServer& operator=(const PluginServer&) = delete;

  // Replaces a stale file at `socket_path` (a dead instance's socket).
  Result<void> start(const std::string& socket_path);
  void stop();
  bool running() const { return server_ != nullptr; }

 private:
  DeviceState& state_;
  const PluginConfig& cfg_;
  PluginHandlers handlers_;
  std::unique_ptr<PluginService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string socket_path_;
};

// Register(version v1beta1, endpoint, resource) on kubelet's Registration
// service at `kubelet_socket`.
Result<void> register_with_kubelet(const std::string& kubelet_socket, const std::string& endpoint,
                                   const std::string& resource_name, bool preferred_allocation,
                                   std::chrono::milliseconds timeout);

}  // namespace hami::deviceplugin
