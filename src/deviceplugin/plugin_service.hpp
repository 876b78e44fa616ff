#pragma once
// The DevicePlugin gRPC service (kubelet device plugin API v1beta1) kubelet
// calls on our socket. It knows devices and the proto; what Allocate and
// GetPreferredAllocation answer comes from handlers (allocator.hpp in the
// daemon, anything in tests), so this file has no Kubernetes in it.
//
// ListAndWatch sends the whole list at once and again on every health change
// (DeviceState's version), until kubelet hangs up or shutdown() is called.
// A failed Allocate is a gRPC error whose message is the handler's, which
// kubelet puts in the pod's UnexpectedAdmissionError.
//
//   PluginService svc(state, cfg, {.allocate = ..., .preferred = ...});
//   builder.RegisterService(&svc);  ...  svc.shutdown(); server->Shutdown();

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "deviceplugin/allocator.hpp"
#include "deviceplugin/config.hpp"
#include "deviceplugin/container_plan.hpp"
#include "deviceplugin/device_state.hpp"
#include "deviceplugin/v1beta1/api.grpc.pb.h"

namespace hami::deviceplugin {

inline constexpr const char* kHealthy = "Healthy";
inline constexpr const char* kUnhealthy = "Unhealthy";
inline constexpr const char* kApiVersion = "v1beta1";

struct PluginHandlers {
  std::function<Result<std::vector<ContainerPlan>>(const std::vector<std::vector<std::string>>&)>
      allocate;
  std::function<std::vector<std::vector<std::string>>(const std::vector<PreferredRequest>&)>
      preferred;
};

// The list ListAndWatch sends for these GPUs.
v1beta1::ListAndWatchResponse device_list(const std::vector<Gpu>& gpus, const PluginConfig& cfg);

class PluginService final : public v1beta1::DevicePlugin::Service {
 public:
  PluginService(DeviceState& state, const PluginConfig& cfg, PluginHandlers handlers);

  // Ends every ListAndWatch stream promptly (before the server's Shutdown).
  void shutdown();

  grpc::Status GetDevicePluginOptions(grpc::ServerContext* ctx, const v1beta1::Empty* req,
                                      v1beta1::DevicePluginOptions* resp) override;
  grpc::Status ListAndWatch(grpc::ServerContext* ctx, const v1beta1::Empty* req,
                            grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) override;
  grpc::Status GetPreferredAllocation(grpc::ServerContext* ctx,
                                      const v1beta1::PreferredAllocationRequest* req,
                                      v1beta1::PreferredAllocationResponse* resp) override;
  grpc::Status Allocate(grpc::ServerContext* ctx, const v1beta1::AllocateRequest* req,
                        v1beta1::AllocateResponse* resp) override;
  grpc::Status PreStartContainer(grpc::ServerContext* ctx,
                                 const v1beta1::PreStartContainerRequest* req,
                                 v1beta1::PreStartContainerResponse* resp) override;

 private:
  DeviceState& state_;
  const PluginConfig& cfg_;
  PluginHandlers handlers_;
  std::atomic<bool> stopping_{false};
};

}  // namespace hami::deviceplugin
