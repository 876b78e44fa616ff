#include "deviceplugin/plugin_server.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

#include <grpcpp/grpcpp.h>

#include "common/log.hpp"

namespace hami::deviceplugin {

PluginServer::PluginServer(DeviceState& state, const PluginConfig& cfg, PluginHandlers handlers)
    : state_(state), cfg_(cfg), handlers_(std::move(handlers)) {}

PluginServer::~PluginServer() {
  stop();
}

Result<void> PluginServer::start(const std::string& socket_path) {
  stop();
  if (::unlink(socket_path.c_str()) != 0 && errno != ENOENT)
    return Error::from_errno(socket_path + ": cannot remove the old socket");
  service_ = std::make_unique<PluginService>(state_, cfg_, handlers_);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix://" + socket_path, grpc::InsecureServerCredentials());
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (!server_) {
    service_.reset();
    return Error{socket_path +
                 ": cannot serve the device plugin there (is the directory "
                 "writable and the path short enough for a unix socket?)"};
  }
  socket_path_ = socket_path;
  log::info("serving the device plugin API on %s", socket_path.c_str());
  return {};
}

void PluginServer::stop() {
  if (!server_) return;
  service_->shutdown();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  server_->Wait();
  server_.reset();
  service_.reset();
  ::unlink(socket_path_.c_str());
  log::info("stopped serving on %s", socket_path_.c_str());
}

Result<void> register_with_kubelet(const std::string& kubelet_socket, const std::string& endpoint,
                                   const std::string& resource_name, bool preferred_allocation,
                                   std::chrono::milliseconds timeout) {
  auto channel =
      grpc::CreateChannel("unix://" + kubelet_socket, grpc::InsecureChannelCredentials());
  auto stub = v1beta1::Registration::NewStub(channel);
  v1beta1::RegisterRequest req;
  req.set_version(kApiVersion);
  req.set_endpoint(endpoint);
  req.set_resource_name(resource_name);
  req.mutable_options()->set_pre_start_required(false);
  req.mutable_options()->set_get_preferred_allocation_available(preferred_allocation);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  ctx.set_wait_for_ready(false);
  v1beta1::Empty resp;
  const grpc::Status st = stub->Register(&ctx, req, &resp);
  if (!st.ok()) {
    return Error{"Register " + resource_name + " with kubelet at " + kubelet_socket + ": " +
                 st.error_message() + " (gRPC code " + std::to_string(st.error_code()) + ")"};
  }
  return {};
}

}  // namespace hami::deviceplugin
