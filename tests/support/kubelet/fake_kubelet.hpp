#pragma once
// A kubelet double for device plugin tests, speaking the real v1beta1 proto
// over real unix sockets: it serves Registration on <dir>/kubelet.sock and,
// like kubelet's device manager, dials each plugin that registers, asks its
// options and consumes its ListAndWatch stream, keeping the latest device
// list. Tests call Allocate and GetPreferredAllocation through it.
// restart() does what a kubelet restart does to the directory: every file in
// it goes (plugins' sockets included) and kubelet.sock is created anew.
//
//   hami::test::FakeKubelet kubelet(dir.path());
//   ASSERT_TRUE(kubelet.wait_for_registrations(1));
//   ASSERT_TRUE(kubelet.wait_for_devices("nvidia.com/gpu",
//       [](const auto& list) { return list.devices_size() == 20; }));
//   v1beta1::AllocateResponse resp;
//   grpc::Status st = kubelet.allocate("nvidia.com/gpu", {{"GPU-a-0"}}, &resp);

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "deviceplugin/v1beta1/api.grpc.pb.h"

namespace hami::test {

using DeviceListPredicate = std::function<bool(const v1beta1::ListAndWatchResponse&)>;

class FakeKubelet {
 public:
  explicit FakeKubelet(std::string dir);  // serving at once
  ~FakeKubelet();
  FakeKubelet(const FakeKubelet&) = delete;
  FakeKubelet& operator=(const FakeKubelet&) = delete;

  std::string socket_path() const { return dir_ + "/kubelet.sock"; }
  void start();
  void stop();     // the socket stays, as a crashed kubelet leaves it
  void restart();  // stop, empty the directory, start

  std::vector<v1beta1::RegisterRequest> registrations() const;
  bool wait_for_registrations(size_t n,
                              std::chrono::milliseconds timeout = std::chrono::seconds(10)) const;

  // Waits until the latest list from `resource`'s current endpoint satisfies `pred`.
  bool wait_for_devices(const std::string& resource, const DeviceListPredicate& pred,
                        std::chrono::milliseconds timeout = std::chrono::seconds(10)) const;
  v1beta1::ListAndWatchResponse devices(const std::string& resource) const;
  v1beta1::DevicePluginOptions options(const std::string& resource) const;

  grpc::Status allocate(const std::string& resource,
                        const std::vector<std::vector<std::string>>& device_ids,
                        v1beta1::AllocateResponse* out);
  grpc::Status preferred(const std::string& resource,
                         const v1beta1::PreferredAllocationRequest& req,
                         v1beta1::PreferredAllocationResponse* out);

 private:
  class RegistrationService;
  struct Endpoint;
  void on_register(const v1beta1::RegisterRequest& req);
  std::shared_ptr<Endpoint> endpoint(const std::string& resource) const;

  std::string dir_;
  std::unique_ptr<RegistrationService> service_;
  std::unique_ptr<grpc::Server> server_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::vector<v1beta1::RegisterRequest> registrations_;
  std::map<std::string, std::shared_ptr<Endpoint>> endpoints_;
};

}  // namespace hami::test
