#include "deviceplugin/plugin_service.hpp"

#include <chrono>

#include "common/log.hpp"

namespace hami::deviceplugin {

v1beta1::ListAndWatchResponse device_list(const std::vector<Gpu>& gpus, const PluginConfig& cfg) {
  v1beta1::ListAndWatchResponse resp;
  for (const Gpu& g : gpus) {
    for (const std::string& id : virtual_ids(g, cfg.device_split_count)) {
      v1beta1::Device* d = resp.add_devices();
      d->set_id(id);
      d->set_health(g.healthy ? kHealthy : kUnhealthy);
      if (cfg.enable_numa_topology && g.numa) d->mutable_topology()->add_nodes()->set_id(*g.numa);
    }
  }
  return resp;
}

PluginService::PluginService(DeviceState& state, const PluginConfig& cfg, PluginHandlers handlers)
    : state_(state), cfg_(cfg), handlers_(std::move(handlers)) {}

void PluginService::shutdown() {
  stopping_ = true;
  state_.wake_all();
}

grpc::Status PluginService::GetDevicePluginOptions(grpc::ServerContext*, const v1beta1::Empty*,
                                                   v1beta1::DevicePluginOptions* resp) {
  // The same answer as in Register (upstream says true here regardless).
  resp->set_pre_start_required(false);
  resp->set_get_preferred_allocation_available(cfg_.enable_get_preferred_allocation);
  return grpc::Status::OK;
}

grpc::Status PluginService::ListAndWatch(
    grpc::ServerContext* ctx, const v1beta1::Empty*,
    grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) {
  uint64_t sent = 0;
  log::info("kubelet is watching the device list (%s)", ctx->peer().c_str());
  while (!stopping_ && !ctx->IsCancelled()) {
    const uint64_t v = state_.version();
    if (v != sent) {
      const std::vector<Gpu> gpus = state_.gpus();
      size_t unhealthy = 0;
      for (const Gpu& g : gpus)
        unhealthy += g.healthy ? 0 : 1;
      const auto resp = device_list(gpus, cfg_);
      if (!writer->Write(resp)) break;
      log::info("sent %d devices on %zu GPUs to kubelet (%zu unhealthy)", resp.devices_size(),
                gpus.size(), unhealthy);
      sent = v;
    }
    // The wait ends at once on a change or shutdown(); the timeout only
    // bounds how late a hung-up kubelet is noticed.
    state_.wait_change(sent, std::chrono::milliseconds(500));
  }
  return grpc::Status::OK;
}

grpc::Status PluginService::GetPreferredAllocation(grpc::ServerContext*,
                                                   const v1beta1::PreferredAllocationRequest* req,
                                                   v1beta1::PreferredAllocationResponse* resp) {
  std::vector<PreferredRequest> reqs;
  for (const auto& c : req->container_requests()) {
    PreferredRequest r;
    r.available.assign(c.available_deviceids().begin(), c.available_deviceids().end());
    r.must_include.assign(c.must_include_deviceids().begin(), c.must_include_deviceids().end());
    r.size = c.allocation_size() > 0 ? static_cast<size_t>(c.allocation_size()) : 0;
    reqs.push_back(std::move(r));
  }
  std::vector<std::vector<std::string>> picks;
  if (handlers_.preferred) picks = handlers_.preferred(reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    auto* out = resp->add_container_responses();
    if (i < picks.size()) {
      for (const auto& id : picks[i])
        out->add_deviceids(id);
    }
  }
  return grpc::Status::OK;
}

grpc::Status PluginService::Allocate(grpc::ServerContext*, const v1beta1::AllocateRequest* req,
                                     v1beta1::AllocateResponse* resp) {
  std::vector<std::vector<std::string>> ids;
  for (const auto& c : req->container_requests())
    ids.emplace_back(c.devices_ids().begin(), c.devices_ids().end());
  if (!handlers_.allocate)
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "Allocate is not available");
  auto plans = handlers_.allocate(ids);
  if (!plans) return grpc::Status(grpc::StatusCode::UNKNOWN, plans.error().message);
  for (const ContainerPlan& p : *plans) {
    auto* c = resp->add_container_responses();
    for (const auto& [k, v] : p.envs)
      (*c->mutable_envs())[k] = v;
    for (const MountSpec& m : p.mounts) {
      auto* mount = c->add_mounts();
      mount->set_container_path(m.container_path);
      mount->set_host_path(m.host_path);
      mount->set_read_only(m.read_only);
    }
    for (const auto& [k, v] : p.annotations)
      (*c->mutable_annotations())[k] = v;
    for (const std::string& name : p.cdi_devices)
      c->add_cdi_devices()->set_name(name);
  }
  return grpc::Status::OK;
}

grpc::Status PluginService::PreStartContainer(grpc::ServerContext*,
                                              const v1beta1::PreStartContainerRequest*,
                                              v1beta1::PreStartContainerResponse*) {
  return grpc::Status::OK;
}

}  // namespace hami::deviceplugin
