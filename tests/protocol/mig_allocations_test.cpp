// hami.io/vgpu-mig-allocations: upstream v2.10's field names and order, GI/CI
// IDs of 0 kept, and the refusals that keep the plugin from acting on a
// half-recorded instance.
#include "protocol/mig_allocations.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hami::protocol {
namespace {

using ::testing::HasSubstr;

MigAllocation reserved() {
  MigAllocation a;
  a.container_index = 1;
  a.device_index = 0;
  a.gpu_uuid = "GPU-a";
  a.profile = "3g.40gb";
  a.placement = {4, 4};
  return a;
}

TEST(MigAllocations, EncodesUpstreamFieldsInOrder) {
  MigAllocation done = reserved();
  done.container_index = 0;
  done.profile = "7g.80gb";
  done.placement = {0, 8};
  done.mig_uuid = "MIG-x";
  done.gpu_instance_id = 0;  // the 7g instance is GI 0: still written
  done.compute_instance_id = 0;
  EXPECT_EQ(encode_mig_allocations({reserved(), done}),
            R"([{"containerIndex":1,"deviceIndex":0,"gpuUUID":"GPU-a","profile":"3g.40gb",)"
            R"("placement":{"start":4,"size":4}},)"
            R"({"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-a","profile":"7g.80gb",)"
            R"("placement":{"start":0,"size":8},"migUUID":"MIG-x","gpuInstanceID":0,)"
            R"("computeInstanceID":0}])");
  EXPECT_EQ(encode_mig_allocations({}), "[]");
}

TEST(MigAllocations, RoundTripsAndReadsUpstreamText) {
  MigAllocation done = reserved();
  done.mig_uuid = "MIG-y";
  done.gpu_instance_id = 2;
  done.compute_instance_id = 0;
  std::vector<MigAllocation> v = {reserved(), done};
  v[1].device_index = 1;
  auto back = decode_mig_allocations(encode_mig_allocations(v));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, v);
  EXPECT_FALSE((*back)[0].realised());
  EXPECT_TRUE((*back)[1].realised());

  // As upstream's Go encoder writes it (keys in any order, fields we do not
  // model ignored, start 0 left out by a writer that omits zeros).
  auto up = decode_mig_allocations(
      R"([{"profile":"1g.10gb","gpuUUID":"GPU-b","containerIndex":2,"deviceIndex":1,)"
      R"("placement":{"size":1},"extra":true}])");
  ASSERT_TRUE(up) << up.error().message;
  ASSERT_EQ(up->size(), 1u);
  EXPECT_EQ((*up)[0].container_index, 2);
  EXPECT_EQ((*up)[0].device_index, 1);
  EXPECT_EQ((*up)[0].placement, (MigPlacement{0, 1}));
  EXPECT_FALSE((*up)[0].gpu_instance_id);
}

TEST(MigAllocations, RefusesWhatThePluginCannotActOn) {
  auto err = [](const char* text) {
    auto r = decode_mig_allocations(text);
    return r ? std::string("accepted") : r.error().message;
  };
  EXPECT_THAT(err("{}"), HasSubstr("not a JSON array"));
  EXPECT_THAT(err("[1"), HasSubstr("not valid JSON"));
  EXPECT_THAT(err(R"([{"profile":"1g.10gb","placement":{"start":0,"size":1}}])"),
              HasSubstr("no gpuUUID"));
  EXPECT_THAT(err(R"([{"gpuUUID":"GPU-a","placement":{"start":0,"size":1}}])"),
              HasSubstr("no profile"));
  EXPECT_THAT(err(R"([{"gpuUUID":"GPU-a","profile":"1g.10gb"}])"), HasSubstr("no placement"));
  EXPECT_THAT(err(R"([{"gpuUUID":"GPU-a","profile":"1g.10gb","placement":{"start":3}}])"),
              HasSubstr("no size"));
  EXPECT_THAT(err(R"([{"gpuUUID":"GPU-a","profile":"p","containerIndex":-1,)"
                  R"("placement":{"start":0,"size":1}}])"),
              HasSubstr("out of range"));
  EXPECT_THAT(err(R"([{"gpuUUID":"GPU-a","profile":"p","placement":{"start":"0","size":1}}])"),
              HasSubstr("expected a whole number"));
  EXPECT_THAT(err(R"([{"gpuUUID":"GPU-a","profile":"p","placement":{"start":4294967295,)"
                  R"("size":2}}])"),
              HasSubstr("out of range"));
  // Runtime fields all or none.
  EXPECT_THAT(err(R"([{"gpuUUID":"GPU-a","profile":"p","placement":{"start":0,"size":1},)"
                  R"("migUUID":"MIG-x","gpuInstanceID":1}])"),
              HasSubstr("all set or none"));
  EXPECT_THAT(err(R"([{"gpuUUID":"GPU-a","profile":"p","placement":{"start":0,"size":1},)"
                  R"("gpuInstanceID":1,"computeInstanceID":0}])"),
              HasSubstr("all set or none"));
  // One container's device twice.
  EXPECT_THAT(err(R"([{"gpuUUID":"GPU-a","profile":"p","placement":{"start":0,"size":1}},)"
                  R"({"gpuUUID":"GPU-b","profile":"p","placement":{"start":0,"size":1}}])"),
              HasSubstr("allocated twice"));
}

TEST(MigAllocations, PlacementsOverlapWhenTheyShareASlice) {
  EXPECT_TRUE((MigPlacement{0, 4}).overlaps({3, 1}));
  EXPECT_TRUE((MigPlacement{4, 4}).overlaps({0, 8}));
  EXPECT_FALSE((MigPlacement{0, 4}).overlaps({4, 4}));
  EXPECT_FALSE((MigPlacement{6, 1}).overlaps({5, 1}));
}

}  // namespace
}  // namespace hami::protocol
