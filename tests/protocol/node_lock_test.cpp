// The node lock value (hami.io/mutex.lock), on the exact strings upstream writes.
#include "protocol/node_lock.hpp"

#include <gtest/gtest.h>

#include <chrono>

namespace hami::protocol {
namespace {

TEST(NodeLock, ParsesUpstreamValue) {
  auto l = parse_node_lock("2024-05-01T10:00:00Z,default,my-pod");
  ASSERT_TRUE(l) << l.error().message;
  EXPECT_EQ(l->ns, "default");
  EXPECT_EQ(l->name, "my-pod");
  EXPECT_TRUE(l->names_pod());
  EXPECT_TRUE(l->held_by("default", "my-pod"));
  EXPECT_FALSE(l->held_by("other", "my-pod"));
  EXPECT_EQ(std::chrono::system_clock::to_time_t(l->time), 1714557600);
}

TEST(NodeLock, LegacyTimeOnlyNamesNoPod) {
  auto l = parse_node_lock("2024-05-01T10:00:00+02:00");
  ASSERT_TRUE(l) << l.error().message;
  EXPECT_FALSE(l->names_pod());
}

TEST(NodeLock, RejectsMalformedValues) {
  EXPECT_FALSE(parse_node_lock(""));
  EXPECT_FALSE(parse_node_lock("yesterday,default,p"));
  EXPECT_FALSE(parse_node_lock("2024-05-01T10:00:00Z,default"));
  EXPECT_FALSE(parse_node_lock("2024-05-01T10:00:00Z,,p"));
  EXPECT_FALSE(parse_node_lock("2024-05-01T10:00:00Z,ns,a,b"));
}

TEST(NodeLock, FormatRoundTrips) {
  const auto t = std::chrono::system_clock::from_time_t(1714557600);
  const std::string v = format_node_lock(t, "ns", "p");
  EXPECT_EQ(v, "2024-05-01T10:00:00Z,ns,p");
  auto l = parse_node_lock(v);
  ASSERT_TRUE(l);
  EXPECT_TRUE(l->held_by("ns", "p"));
}

}  // namespace
}  // namespace hami::protocol
