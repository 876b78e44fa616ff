#pragma once
// Why a pod does not fit a node, counted per GPU with upstream's reason names
// (pkg/device/common), and rendered the way upstream reports it in
// FailedNodes and events: "<n>/<cards> <Reason>" joined by ", ", where cards
// is the number of GPUs of the requested vendor on the node.
//
//   if (!fit.fits) failed[node.name] = describe(fit.failure);
//   // "6/8 CardInsufficientMemory, 2/8 CardTypeMismatch"
//
// Reasons appear in the order below (upstream's came in map order, i.e.
// randomly), so the same failure always reads the same.

#include <array>
#include <cstdint>
#include <string>

namespace hami::fit {

// In the order the per-GPU checks run (§3.5), then the per-container outcome.
enum class Reason : uint8_t {
  kCardNotHealth,
  kCardCordoned,
  kCardTypeMismatch,
  kNumaNotFit,
  kCardUuidMismatch,
  kMpsUserMismatch,  // ours: an MPS GPU whose server serves another user
  kCardTimeSlicingExhausted,
  kExclusiveDeviceAllocateConflict,
  kCardInsufficientMemory,
  kCardInsufficientCore,
  kCardComputeUnitsExhausted,
  kCardMigTopologyInfeasible,  // dynamic MIG: no allowed profile has a free placement
  kAllocatedCardsInsufficientRequest,
  kCount,
};
inline constexpr size_t kReasonCount = static_cast<size_t>(Reason::kCount);

const char* reason_name(Reason r);
inline constexpr const char* kNodeInsufficientDevice = "NodeInsufficientDevice";

struct FitFailure {
  std::array<uint16_t, kReasonCount> counts{};  // GPUs per reason
  uint16_t cards = 0;                           // GPUs of the container's vendor
  // The request asked for more GPUs than the node has of that vendor; no
  // GPU was examined (upstream reports the bare name).
  bool node_insufficient_device = false;
  uint16_t container = 0;  // the container (pod position) that did not fit

  uint16_t count(Reason r) const { return counts[static_cast<size_t>(r)]; }
  void add(Reason r, uint16_t n = 1) { counts[static_cast<size_t>(r)] += n; }
};

std::string describe(const FitFailure& f);

}  // namespace hami::fit
