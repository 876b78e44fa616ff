// Quantities and upstream's container resource rules (§1.1).
#include <gtest/gtest.h>

#include <ostream>

#include <map>

#include "fit/quantity.hpp"
#include "fit/resources.hpp"

namespace hami::fit {
namespace {

TEST(Quantity, WholeNumbers) {
  const std::vector<std::pair<const char*, int64_t>> ok = {
      {"0", 0},
      {"3000", 3000},
      {"+7", 7},
      {"-2", -2},
      {"3k", 3000},
      {"2M", 2000000},
      {"1Ki", 1024},
      {"1Gi", 1073741824},
      {"1e3", 1000},
      {"1E3", 1000},
      {"120e-1", 12},
      {"2000m", 2},
      {"1.5k", 1500},
      {"0.5Ki", 512},
      {"1.000", 1},
      {"007", 7},
      {"0.0", 0},
      {"1E", 1000000000000000000},
      {"9223372036854775807", INT64_MAX},
      {"7Ei", 8070450532247928832},
      {"1.5Gi", 1610612736},
      {".5Ki", 512},
      {"2Ti", 2199023255552},
      {"1.5G", 1500000000},
      {"100e-2", 1},
      {"0.000Gi", 0},
  };
  for (const auto& [text, want] : ok) {
    auto v = parse_whole_quantity(text);
    ASSERT_TRUE(v) << text << ": " << v.error().message;
    EXPECT_EQ(*v, want) << text;
  }
}

TEST(Quantity, Refused) {
  for (const char* bad : {"",    "+",     "k",        ".",
                          "1.5", "500m",  "1..0",     "1x",
                          "1 ",  " 1",    "1Kb",      "1e",
                          "1e+", "1e1.5", "12e-1",    "9223372036854775808",
                          "8Ei", "1e19",  "1e100000", "100000000000000000000000000000000000000000",
                          "1Qi", "0x10",  "1ki",      "1.2.3",
                          "--1", "abc",   "Ki",       "1 Gi"}) {
    auto v = parse_whole_quantity(bad);
    ASSERT_FALSE(v) << bad;
    EXPECT_NE(v.error().message.find("quantity '"), std::string::npos);
  }
}

using Quantities = std::map<std::string, std::string>;

Result<std::optional<ContainerRequest>> request(const Quantities& limits,
                                                const Quantities& requests = {},
                                                ResourceConfig config = {}) {
  auto lookup = [](const Quantities& q) {
    return [&q](std::string_view name) -> std::optional<std::string_view> {
      auto it = q.find(std::string(name));
      if (it == q.end()) return std::nullopt;
      return it->second;
    };
  };
  auto l = lookup(limits);
  auto r = lookup(requests);
  return container_request(l, r, config);
}

struct RuleCase {
  const char* name;
  Quantities limits;
  Quantities requests;
  ResourceConfig config;
  int32_t nums, mem, pct, cores;
};

// Names the row in test output instead of dumping its bytes.
void PrintTo(const RuleCase& c, std::ostream* os) {
  *os << c.name;
}

class ResourceRules : public ::testing::TestWithParam<RuleCase> {};

TEST_P(ResourceRules, AsUpstream) {
  const auto& c = GetParam();
  auto r = request(c.limits, c.requests, c.config);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_TRUE(*r);
  EXPECT_EQ((*r)->nums, c.nums);
  EXPECT_EQ((*r)->mem_mib, c.mem);
  EXPECT_EQ((*r)->mem_percent, c.pct);
  EXPECT_EQ((*r)->cores, c.cores);
  EXPECT_EQ((*r)->type, "NVIDIA");
}

ResourceConfig config(int32_t default_memory, int32_t default_cores, int32_t factor) {
  ResourceConfig c;
  c.default_memory_mib = default_memory;
  c.default_cores = default_cores;
  c.memory_factor = factor;
  return c;
}

INSTANTIATE_TEST_SUITE_P(
    Fit, ResourceRules,
    ::testing::Values(
        RuleCase{"count_only_is_the_whole_card", {{"nvidia.com/gpu", "1"}}, {}, {}, 1, 0, 100, 0},
        RuleCase{
            "memory_and_cores",
            {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "3000"}, {"nvidia.com/gpucores", "30"}},
            {},
            {},
            2,
            3000,
            101,
            30},
        RuleCase{"percentage",
                 {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "50"}},
                 {},
                 {},
                 1,
                 0,
                 50,
                 0},
        RuleCase{"percentage_over_100_is_100",
                 {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "150"}},
                 {},
                 {},
                 1,
                 0,
                 100,
                 0},
        RuleCase{"percentage_0_is_not_given",
                 {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "0"}},
                 {},
                 {},
                 1,
                 0,
                 100,
                 0},
        RuleCase{"memory_0_is_not_given",
                 {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "0"}},
                 {},
                 {},
                 1,
                 0,
                 100,
                 0},
        RuleCase{"both_kept_memory_wins_at_fit",
                 {{"nvidia.com/gpu", "1"},
                  {"nvidia.com/gpumem", "1000"},
                  {"nvidia.com/gpumem-percentage", "50"}},
                 {},
                 {},
                 1,
                 1000,
                 50,
                 0},
        RuleCase{
            "default_memory", {{"nvidia.com/gpu", "1"}}, {}, config(2048, 0, 1), 1, 2048, 101, 0},
        RuleCase{"default_memory_is_not_scaled",
                 {{"nvidia.com/gpu", "1"}},
                 {},
                 config(2048, 0, 4),
                 1,
                 2048,
                 101,
                 0},
        RuleCase{"default_cores", {{"nvidia.com/gpu", "1"}}, {}, config(0, 20, 1), 1, 0, 100, 20},
        RuleCase{"given_cores_beat_default",
                 {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpucores", "0"}},
                 {},
                 config(0, 20, 1),
                 1,
                 0,
                 100,
                 0},
        RuleCase{"cores_over_100_are_100",
                 {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpucores", "300"}},
                 {},
                 {},
                 1,
                 0,
                 100,
                 100},
        RuleCase{"memory_factor",
                 {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "3"}},
                 {},
                 config(0, 0, 1024),
                 1,
                 3072,
                 101,
                 0},
        RuleCase{
            "requests_are_the_fallback",
            {{"nvidia.com/gpumem", "100"}},
            {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "999"}, {"nvidia.com/gpucores", "5"}},
            {},
            1,
            100,
            101,
            5},
        RuleCase{"quantity_forms",
                 {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "3k"}},
                 {},
                 {},
                 1,
                 3000,
                 101,
                 0}),
    [](const auto& tp) { return std::string(tp.param.name); });

TEST(ResourceRules, NotAGpuContainer) {
  auto r = request({{"nvidia.com/gpumem", "3000"}});
  ASSERT_TRUE(r);
  EXPECT_FALSE(*r);
  r = request({{"nvidia.com/gpu", "0"}, {"nvidia.com/gpumem", "3000"}});
  ASSERT_TRUE(r);
  EXPECT_FALSE(*r);
  r = request({});
  ASSERT_TRUE(r);
  EXPECT_FALSE(*r);
}

TEST(ResourceRules, CustomResourceNames) {
  ResourceConfig c;
  c.count_name = "example.com/vgpu";
  c.memory_name = "example.com/vmem";
  auto r = request({{"example.com/vgpu", "1"}, {"example.com/vmem", "10"}, {"nvidia.com/gpu", "5"}},
                   {}, c);
  ASSERT_TRUE(r && *r);
  EXPECT_EQ((*r)->nums, 1);
  EXPECT_EQ((*r)->mem_mib, 10);
}

TEST(ResourceRules, ErrorsNameTheResource) {
  struct Bad {
    Quantities limits;
    ResourceConfig config;
    const char* message;
  };
  const std::vector<Bad> cases = {
      {{{"nvidia.com/gpu", "1.5"}}, {}, "nvidia.com/gpu='1.5': quantity '1.5': not a whole number"},
      {{{"nvidia.com/gpu", "-1"}}, {}, "nvidia.com/gpu='-1': must not be negative"},
      {{{"nvidia.com/gpu", "3000000000"}},
       {},
       "nvidia.com/gpu='3000000000': too large (at most 2147483647)"},
      {{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "3.5"}},
       {},
       "nvidia.com/gpumem='3.5': quantity '3.5': not a whole number"},
      {{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "2Gi"}},
       {},
       "nvidia.com/gpumem='2Gi': too large (at most 2147483647)"},
      {{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "3000000"}},
       config(0, 0, 1024),
       "nvidia.com/gpumem='3000000': too large (at most 2097151)"},
      {{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "half"}},
       {},
       "nvidia.com/gpumem-percentage='half': quantity 'half': no number"},
      {{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpucores", "-5"}},
       {},
       "nvidia.com/gpucores='-5': must not be negative"},
      {{{"nvidia.com/gpu", "1"}}, config(0, 0, 0), "memoryFactor 0 must be at least 1"},
  };
  for (const auto& c : cases) {
    auto r = request(c.limits, {}, c.config);
    ASSERT_FALSE(r) << c.message;
    EXPECT_EQ(r.error().message, c.message);
  }
}

TEST(TaskPriority, ZeroOrOneLimitsFirst) {
  auto prio = [](const Quantities& limits, const Quantities& requests) {
    auto find = [](const Quantities& q) {
      return [&q](std::string_view n) -> std::optional<std::string_view> {
        auto it = q.find(std::string(n));
        if (it == q.end()) return std::nullopt;
        return it->second;
      };
    };
    auto l = find(limits);
    auto r = find(requests);
    return task_priority(l, r, "nvidia.com/priority");
  };
  EXPECT_EQ(*prio({}, {}), std::nullopt);
  EXPECT_EQ(*prio({{"nvidia.com/priority", "0"}}, {}), 0);
  EXPECT_EQ(*prio({{"nvidia.com/priority", "1"}}, {{"nvidia.com/priority", "0"}}), 1);
  EXPECT_EQ(*prio({}, {{"nvidia.com/priority", "1"}}), 1);
  for (const char* bad : {"7", "-1", "high", "", "01"}) {
    auto r = prio({{"nvidia.com/priority", bad}}, {});
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().message,
              std::string("nvidia.com/priority '") + bad + "' is not 0 (high) or 1 (low)");
  }
}

}  // namespace
}  // namespace hami::fit
