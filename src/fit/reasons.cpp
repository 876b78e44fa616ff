#include "fit/reasons.hpp"

namespace hami::fit {

const char* reason_name(Reason r) {
  switch (r) {
    case Reason::kCardNotHealth:
      return "CardNotHealth";
    case Reason::kCardCordoned:
      return "CardCordoned";
    case Reason::kCardTypeMismatch:
      return "CardTypeMismatch";
    case Reason::kMpsUserMismatch:
      return "MpsUserMismatch";
    case Reason::kNumaNotFit:
      return "NumaNotFit";
    case Reason::kCardUuidMismatch:
      return "CardUuidMismatch";
    case Reason::kCardTimeSlicingExhausted:
      return "CardTimeSlicingExhausted";
    case Reason::kExclusiveDeviceAllocateConflict:
      return "ExclusiveDeviceAllocateConflict";
    case Reason::kCardInsufficientMemory:
      return "CardInsufficientMemory";
    case Reason::kCardInsufficientCore:
      return "CardInsufficientCore";
    case Reason::kCardComputeUnitsExhausted:
      return "CardComputeUnitsExhausted";
    case Reason::kCardMigTopologyInfeasible:
      return "CardMigTopologyInfeasible";
    case Reason::kAllocatedCardsInsufficientRequest:
      return "AllocatedCardsInsufficientRequest";
    case Reason::kCount:
      break;
  }
  return "Unknown";
}

std::string describe(const FitFailure& f) {
  if (f.node_insufficient_device) return kNodeInsufficientDevice;
  std::string out;
  const std::string cards = std::to_string(f.cards);
  for (size_t i = 0; i < kReasonCount; ++i) {
    if (f.counts[i] == 0) continue;
    if (!out.empty()) out += ", ";
    out += std::to_string(f.counts[i]);
    out += '/';
    out += cards;
    out += ' ';
    out += reason_name(static_cast<Reason>(i));
  }
  return out;
}

}  // namespace hami::fit
