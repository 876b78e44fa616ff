#include "support/kubelet/fake_kubelet.hpp"

#include <filesystem>
#include <stdexcept>
#include <thread>

namespace hami::test {

// One registered plugin: its stub and the ListAndWatch consumer.
struct FakeKubelet::Endpoint {
  std::unique_ptr<v1beta1::DevicePlugin::Stub> stub;
  grpc::ClientContext watch_ctx;
  std::thread reader;
  FakeKubelet* owner = nullptr;
  // Guarded by owner->mu_.
  v1beta1::ListAndWatchResponse latest;
  v1beta1::DevicePluginOptions options;
  size_t lists = 0;
  bool ended = false;

  ~Endpoint() {
    watch_ctx.TryCancel();
    if (reader.joinable()) reader.join();
  }
};

class FakeKubelet::RegistrationService final : public v1beta1::Registration::Service {
 public:
  explicit RegistrationService(FakeKubelet& k) : k_(k) {}
  grpc::Status Register(grpc::ServerContext*, const v1beta1::RegisterRequest* req,
                        v1beta1::Empty*) override {
    // kubelet's checks: the version, and a resource name with a domain.
    if (req->version() != "v1beta1")
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "Unsupported version: " + req->version());
    if (req->resource_name().find('/') == std::string::npos)
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "Invalid resource name: " + req->resource_name());
    k_.on_register(*req);
    return grpc::Status::OK;
  }

 private:
  FakeKubelet& k_;
};

FakeKubelet::FakeKubelet(std::string dir) : dir_(std::move(dir)) {
  start();
}

FakeKubelet::~FakeKubelet() {
  stop();
  std::map<std::string, std::shared_ptr<Endpoint>> eps;
  {
    std::lock_guard lk(mu_);
    eps.swap(endpoints_);
  }
}

void FakeKubelet::start() {
  if (server_) return;
  std::filesystem::remove(socket_path());
  service_ = std::make_unique<RegistrationService>(*this);
  grpc::ServerBuilder b;
  b.AddListeningPort("unix://" + socket_path(), grpc::InsecureServerCredentials());
  b.RegisterService(service_.get());
  server_ = b.BuildAndStart();
  if (!server_) throw std::runtime_error("fake kubelet: cannot serve on " + socket_path());
}

void FakeKubelet::stop() {
  if (!server_) return;
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server_->Wait();
  server_.reset();
  service_.reset();
}

void FakeKubelet::restart() {
  stop();
  std::map<std::string, std::shared_ptr<Endpoint>> eps;
  {
    std::lock_guard lk(mu_);
    eps.swap(endpoints_);
  }
  eps.clear();  // kubelet forgets its plugins; their streams end
  for (const auto& e : std::filesystem::directory_iterator(dir_))
    std::filesystem::remove_all(e.path());
  start();
}

void FakeKubelet::on_register(const v1beta1::RegisterRequest& req) {
  auto ep = std::make_shared<Endpoint>();
  ep->owner = this;
  auto channel = grpc::CreateChannel("unix://" + dir_ + "/" + req.endpoint(),
                                     grpc::InsecureChannelCredentials());
  ep->stub = v1beta1::DevicePlugin::NewStub(channel);
  std::shared_ptr<Endpoint> old;
  {
    std::lock_guard lk(mu_);
    registrations_.push_back(req);
    old = std::move(endpoints_[req.resource_name()]);
    endpoints_[req.resource_name()] = ep;
  }
  // As kubelet does, after answering: options first, then the stream.
  Endpoint* raw = ep.get();
  ep->reader = std::thread([this, raw] {
    grpc::ClientContext octx;
    octx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1beta1::DevicePluginOptions opts;
    v1beta1::Empty empty;
    if (raw->stub->GetDevicePluginOptions(&octx, empty, &opts).ok()) {
      std::lock_guard lk(mu_);
      raw->options = opts;
    }
    auto reader = raw->stub->ListAndWatch(&raw->watch_ctx, empty);
    v1beta1::ListAndWatchResponse resp;
    while (reader->Read(&resp)) {
      std::lock_guard lk(mu_);
      raw->latest = resp;
      ++raw->lists;
      cv_.notify_all();
    }
    reader->Finish();
    std::lock_guard lk(mu_);
    raw->ended = true;
    cv_.notify_all();
  });
  cv_.notify_all();
  // `old` (the previous registration's endpoint) is cancelled and joined here,
  // outside the lock.
}

std::vector<v1beta1::RegisterRequest> FakeKubelet::registrations() const {
  std::lock_guard lk(mu_);
  return registrations_;
}

bool FakeKubelet::wait_for_registrations(size_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock lk(mu_);
  return cv_.wait_for(lk, timeout, [&] { return registrations_.size() >= n; });
}

std::shared_ptr<FakeKubelet::Endpoint> FakeKubelet::endpoint(const std::string& resource) const {
  std::lock_guard lk(mu_);
  auto it = endpoints_.find(resource);
  return it == endpoints_.end() ? nullptr : it->second;
}

bool FakeKubelet::wait_for_devices(const std::string& resource, const DeviceListPredicate& pred,
                                   std::chrono::milliseconds timeout) const {
  std::unique_lock lk(mu_);
  return cv_.wait_for(lk, timeout, [&] {
    auto it = endpoints_.find(resource);
    return it != endpoints_.end() && it->second->lists > 0 && pred(it->second->latest);
  });
}

v1beta1::ListAndWatchResponse FakeKubelet::devices(const std::string& resource) const {
  std::lock_guard lk(mu_);
  auto it = endpoints_.find(resource);
  return it == endpoints_.end() ? v1beta1::ListAndWatchResponse() : it->second->latest;
}

v1beta1::DevicePluginOptions FakeKubelet::options(const std::string& resource) const {
  std::lock_guard lk(mu_);
  auto it = endpoints_.find(resource);
  return it == endpoints_.end() ? v1beta1::DevicePluginOptions() : it->second->options;
}

grpc::Status FakeKubelet::allocate(const std::string& resource,
                                   const std::vector<std::vector<std::string>>& device_ids,
                                   v1beta1::AllocateResponse* out) {
  auto ep = endpoint(resource);
  if (!ep) return grpc::Status(grpc::StatusCode::NOT_FOUND, "no plugin registered " + resource);
  v1beta1::AllocateRequest req;
  for (const auto& ids : device_ids) {
    auto* c = req.add_container_requests();
    for (const auto& id : ids)
      c->add_devices_ids(id);
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  return ep->stub->Allocate(&ctx, req, out);
}

grpc::Status FakeKubelet::preferred(const std::string& resource,
                                    const v1beta1::PreferredAllocationRequest& req,
                                    v1beta1::PreferredAllocationResponse* out) {
  auto ep = endpoint(resource);
  if (!ep) return grpc::Status(grpc::StatusCode::NOT_FOUND, "no plugin registered " + resource);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  return ep->stub->GetPreferredAllocation(&ctx, req, out);
}

}  // namespace hami::test
