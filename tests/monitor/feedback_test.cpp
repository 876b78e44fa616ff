#include "monitor/feedback.hpp"

#include <gtest/gtest.h>

namespace hami::monitor {
namespace {

FeedbackInput c(int32_t recent, int32_t priority, std::vector<std::string> gpus, int32_t sw = 1) {
  return FeedbackInput{recent, sw, priority, std::move(gpus)};
}

TEST(Feedback, ActivityDecaysOneStepPerObservation) {
  const std::vector<FeedbackInput> in = {c(2, 1, {"GPU-a"}), c(1, 1, {"GPU-b"}),
                                         c(0, 1, {"GPU-c"})};
  const auto out = observe(in);
  EXPECT_EQ(out[0].recent_kernel, 1);
  EXPECT_TRUE(out[0].active);  // launched since the last look
  EXPECT_EQ(out[1].recent_kernel, 0);
  EXPECT_FALSE(out[1].active);  // its launch was already counted last time
  EXPECT_EQ(out[2].recent_kernel, 0);
  EXPECT_FALSE(out[2].active);
}

TEST(Feedback, AloneOnAGpuTheShareIsNotEnforcedUnderTheDefaultPolicy) {
  const auto out = observe(std::vector<FeedbackInput>{c(2, 1, {"GPU-a"})});
  EXPECT_EQ(out[0].utilization_switch, 0);
  EXPECT_TRUE(out[0].changed);  // 1 -> 0
}

TEST(Feedback, TwoActiveContainersOfOnePriorityTurnTheSwitchOnForBoth) {
  const auto out = observe(std::vector<FeedbackInput>{c(2, 1, {"GPU-a"}, 0), c(2, 1, {"GPU-a"}, 0),
                                                      c(2, 1, {"GPU-b"}, 0)});
  EXPECT_EQ(out[0].utilization_switch, 1);
  EXPECT_EQ(out[1].utilization_switch, 1);
  EXPECT_EQ(out[2].utilization_switch, 0) << "alone on its own GPU";
}

TEST(Feedback, AnIdleContainerSeesItsBusyPeersAsContention) {
  const auto out = observe(
      std::vector<FeedbackInput>{c(0, 1, {"GPU-a"}, 0), c(2, 1, {"GPU-a"}), c(2, 1, {"GPU-a"})});
  EXPECT_EQ(out[0].utilization_switch, 1);
}

TEST(Feedback, AnActiveHighPriorityContainerBlocksLowerOnesOnItsGpusOnly) {
  const std::vector<FeedbackInput> in = {c(2, 0, {"GPU-a"}), c(2, 1, {"GPU-a"}), c(2, 1, {"GPU-b"}),
                                         c(2, 1, {"GPU-b", "GPU-a"})};
  const auto out = observe(in);
  EXPECT_EQ(out[0].recent_kernel, 1) << "the high-priority one runs";
  EXPECT_EQ(out[0].utilization_switch, 0) << "nothing outranks it, no peer of its priority";
  EXPECT_EQ(out[1].recent_kernel, -1);
  EXPECT_EQ(out[1].utilization_switch, 1);
  EXPECT_EQ(out[2].recent_kernel, 1) << "another GPU: not blocked";
  EXPECT_EQ(out[3].recent_kernel, -1) << "one of its GPUs is the high-priority one's";
}

TEST(Feedback, ABlockIsLiftedOnceTheHighPriorityContainerIsIdle) {
  // Last time: high active, low blocked. Now the high one has not launched.
  const std::vector<FeedbackInput> in = {c(1, 0, {"GPU-a"}), c(-1, 1, {"GPU-a"})};
  const auto out = observe(in);
  EXPECT_FALSE(out[0].active);
  EXPECT_EQ(out[1].recent_kernel, 0);
  EXPECT_TRUE(out[1].changed);
  EXPECT_EQ(out[1].utilization_switch, 0);
}

TEST(Feedback, ABlockedContainerStaysBlockedWhileTheHighOneRuns) {
  const auto out = observe(std::vector<FeedbackInput>{c(2, 0, {"GPU-a"}), c(-1, 1, {"GPU-a"}, 1)});
  EXPECT_EQ(out[1].recent_kernel, -1);
  EXPECT_FALSE(out[1].changed);
}

TEST(Feedback, EqualPrioritiesNeverBlock) {
  const auto out = observe(std::vector<FeedbackInput>{c(2, 0, {"GPU-a"}), c(2, 0, {"GPU-a"})});
  EXPECT_EQ(out[0].recent_kernel, 1);
  EXPECT_EQ(out[1].recent_kernel, 1);
}

TEST(Feedback, NothingChangesForAnIdleNodeAtRest) {
  const auto out =
      observe(std::vector<FeedbackInput>{c(0, 1, {"GPU-a"}, 0), c(0, 0, {"GPU-a"}, 0)});
  EXPECT_FALSE(out[0].changed);
  EXPECT_FALSE(out[1].changed);
}

// MPS: a busy high-priority service must not stop the trainer beside it (its
// kernels run on other SMs at the same time), and an old block is lifted.
TEST(Feedback, MpsClientsAreNeverBlockedAndBlockNobody) {
  FeedbackInput service = c(2, 0, {"GPU-a"});
  FeedbackInput trainer = c(-1, 1, {"GPU-a"});
  FeedbackInput other = c(2, 1, {"GPU-a"});
  service.mps_client = trainer.mps_client = other.mps_client = true;
  const auto out = observe(std::vector<FeedbackInput>{service, trainer, other});
  EXPECT_TRUE(out[0].active);
  EXPECT_EQ(out[1].recent_kernel, 0);  // unblocked
  EXPECT_EQ(out[2].recent_kernel, 1);  // active, not blocked
  for (const FeedbackOutput& o : out)
    EXPECT_EQ(o.utilization_switch, 0);
  // An MPS client's activity does not block a time-sliced container either.
  const auto mixed = observe(std::vector<FeedbackInput>{service, c(2, 1, {"GPU-a"})});
  EXPECT_EQ(mixed[1].recent_kernel, 1);
}

TEST(Feedback, NoContainersNoOutput) {
  EXPECT_TRUE(observe(std::vector<FeedbackInput>{}).empty());
}

}  // namespace
}  // namespace hami::monitor
