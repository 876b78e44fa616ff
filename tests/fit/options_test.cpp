// The annotation value parsers: what each accepts, what it refuses, and that
// every refusal says which annotation and why.
#include <gtest/gtest.h>

#include <ostream>

#include <map>

#include "fit/options.hpp"

namespace hami::fit {
namespace {

Result<PodOptions> parse(const std::map<std::string, std::string>& annos,
                         PolicyDefaults defaults = {}) {
  return parse_pod_options(
      [&](std::string_view key) -> std::optional<std::string_view> {
        auto it = annos.find(std::string(key));
        if (it == annos.end()) return std::nullopt;
        return it->second;
      },
      defaults);
}

TEST(Options, DefaultsWhenNoAnnotation) {
  PolicyDefaults d;
  d.node = NodePolicy::kSpread;
  d.gpu = *parse_gpu_policy("binpack");
  auto o = parse({}, d);
  ASSERT_TRUE(o);
  EXPECT_EQ(o->node_policy, NodePolicy::kSpread);
  EXPECT_EQ(o->gpu_policy.order, GpuPolicy::Order::kBinpack);
  EXPECT_EQ(o->weights, (ScoringWeights{1, 1, 1}));
  EXPECT_FALSE(o->numa_bind);
  EXPECT_FALSE(o->vgpu_mode);
  EXPECT_TRUE(o->use_types.empty());
}

TEST(Options, EveryAnnotation) {
  auto o = parse({{"nvidia.com/use-gputype", "a100, V100,"},
                  {"nvidia.com/nouse-gputype", "1080"},
                  {"nvidia.com/use-gpuuuid", "GPU-a,GPU-b"},
                  {"nvidia.com/nouse-gpuuuid", " GPU-c "},
                  {"nvidia.com/numa-bind", "True"},
                  {"nvidia.com/vgpu-mode", "mig"},
                  {"hami.io/node-scheduler-policy", " spread "},
                  {"hami.io/gpu-scheduler-policy", "numa,binpack"},
                  {"hami.io/device-scoring-weights", "slot=1, core=0, memory=3"}});
  ASSERT_TRUE(o) << o.error().message;
  EXPECT_EQ(o->use_types, (std::vector<std::string>{"A100", "V100"}));
  EXPECT_EQ(o->nouse_types, (std::vector<std::string>{"1080"}));
  EXPECT_EQ(o->use_uuids, (std::vector<std::string>{"GPU-a", "GPU-b"}));
  EXPECT_EQ(o->nouse_uuids, (std::vector<std::string>{"GPU-c"}));
  EXPECT_TRUE(o->numa_bind);
  EXPECT_EQ(o->vgpu_mode, "mig");
  EXPECT_EQ(o->node_policy, NodePolicy::kSpread);
  EXPECT_EQ(o->gpu_policy.order, GpuPolicy::Order::kChain);
  EXPECT_EQ(o->weights, (ScoringWeights{1, 0, 3}));
}

TEST(Options, EmptyValuesAreNoConstraint) {
  auto o = parse({{"nvidia.com/use-gputype", ""},
                  {"nvidia.com/nouse-gputype", " , "},
                  {"nvidia.com/use-gpuuuid", ""},
                  {"nvidia.com/vgpu-mode", " "}});
  ASSERT_TRUE(o);
  EXPECT_TRUE(o->use_types.empty());
  EXPECT_TRUE(o->nouse_types.empty());
  EXPECT_TRUE(o->use_uuids.empty());
  EXPECT_FALSE(o->vgpu_mode);
}

struct BadCase {
  const char* key;
  const char* value;
  const char* message;  // the whole error
};

// Names the row in test output instead of dumping its bytes.
void PrintTo(const BadCase& c, std::ostream* os) {
  *os << c.key << "=" << c.value;
}

class BadAnnotation : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadAnnotation, ErrorNamesKeyValueAndReason) {
  const auto& c = GetParam();
  auto o = parse({{c.key, c.value}});
  ASSERT_FALSE(o);
  EXPECT_EQ(o.error().message, c.message);
}

INSTANTIATE_TEST_SUITE_P(
    Fit, BadAnnotation,
    ::testing::Values(
        BadCase{"nvidia.com/numa-bind", "yes",
                "nvidia.com/numa-bind='yes': not a boolean (true or false)"},
        BadCase{"hami.io/node-scheduler-policy", "Binpack",
                "hami.io/node-scheduler-policy='Binpack': unknown node policy (binpack or spread)"},
        BadCase{"hami.io/gpu-scheduler-policy", "numa,bin-pack",
                "hami.io/gpu-scheduler-policy='numa,bin-pack': unknown GPU policy 'bin-pack' "
                "(binpack, spread, numa, mutex, topology-aware, or a comma chain of them)"},
        BadCase{"hami.io/device-scoring-weights", "slot=1,core=1",
                "hami.io/device-scoring-weights='slot=1,core=1': expected slot, core and "
                "memory weights"},
        BadCase{"hami.io/device-scoring-weights", "slot=1,core=1,memory",
                "hami.io/device-scoring-weights='slot=1,core=1,memory': expected key=value "
                "entries"},
        BadCase{"hami.io/device-scoring-weights", "slot=1,core=1,mem=1",
                "hami.io/device-scoring-weights='slot=1,core=1,mem=1': unknown weight 'mem' "
                "(slot, core, memory)"},
        BadCase{"hami.io/device-scoring-weights", "slot=1,slot=1,memory=1",
                "hami.io/device-scoring-weights='slot=1,slot=1,memory=1': duplicate 'slot' "
                "weight"},
        BadCase{"hami.io/device-scoring-weights", "slot=1,core=x,memory=1",
                "hami.io/device-scoring-weights='slot=1,core=x,memory=1': 'core' weight must "
                "be an integer"},
        BadCase{"hami.io/device-scoring-weights", "slot=1,core=1.5,memory=1",
                "hami.io/device-scoring-weights='slot=1,core=1.5,memory=1': 'core' weight "
                "must be an integer"},
        BadCase{"hami.io/device-scoring-weights", "slot=-1,core=1,memory=1",
                "hami.io/device-scoring-weights='slot=-1,core=1,memory=1': 'slot' weight "
                "must not be negative"},
        BadCase{"hami.io/device-scoring-weights", "slot=0,core=0,memory=0",
                "hami.io/device-scoring-weights='slot=0,core=0,memory=0': at least one "
                "weight must be positive"},
        BadCase{"hami.io/device-scoring-weights", "slot=99999999999999999999,core=1,memory=1",
                "hami.io/device-scoring-weights='slot=99999999999999999999,core=1,memory=1': "
                "'slot' weight must be an integer"}));

TEST(Options, GoBool) {
  for (const char* t : {"1", "t", "T", "TRUE", "true", "True", " true "})
    EXPECT_TRUE(*parse_go_bool(t)) << t;
  for (const char* f : {"0", "f", "F", "FALSE", "false", "False"})
    EXPECT_FALSE(*parse_go_bool(f)) << f;
  for (const char* bad : {"", "yes", "tRUE", "2", "on"})
    EXPECT_FALSE(parse_go_bool(bad).ok()) << bad;
}

TEST(Options, GpuPolicyShapes) {
  struct Case {
    const char* text;
    GpuPolicy::Order order;
    std::vector<SortKey> chain;
    bool mutex;
    bool topology;
    const char* canonical;
  };
  using O = GpuPolicy::Order;
  using K = SortKey;
  const std::vector<Case> cases = {
      {"spread", O::kSpread, {}, false, false, "spread"},
      {" binpack ", O::kBinpack, {}, false, false, "binpack"},
      {"mutex", O::kMutex, {}, true, false, "mutex"},
      {"topology-aware", O::kSpread, {}, false, true, "topology-aware"},
      {"", O::kSpread, {}, false, false, "spread"},
      {"numa", O::kChain, {K::kNuma}, false, false, "numa"},
      {"numa,binpack", O::kChain, {K::kNuma, K::kBinpack}, false, false, "numa,binpack"},
      {"binpack, numa ,binpack", O::kChain, {K::kBinpack, K::kNuma}, false, false, "binpack,numa"},
      {"binpack,mutex", O::kChain, {K::kBinpack}, true, false, "binpack,mutex"},
      {"mutex,topology-aware", O::kChain, {K::kSpread}, true, true, "spread,mutex,topology-aware"},
      {"binpack,", O::kChain, {K::kBinpack}, false, false, "binpack,"},
  };
  for (const auto& c : cases) {
    auto p = parse_gpu_policy(c.text);
    ASSERT_TRUE(p) << c.text;
    EXPECT_EQ(p->order, c.order) << c.text;
    EXPECT_EQ(std::vector<SortKey>(p->chain.begin(), p->chain.begin() + p->chain_len), c.chain)
        << c.text;
    EXPECT_EQ(p->mutex, c.mutex) << c.text;
    EXPECT_EQ(p->topology_aware, c.topology) << c.text;
    // Its canonical spelling reads as the same policy.
    EXPECT_EQ(*parse_gpu_policy(c.canonical), *p) << c.text;
  }
}

TEST(Options, NodePolicy) {
  EXPECT_EQ(*parse_node_policy("binpack"), NodePolicy::kBinpack);
  EXPECT_EQ(*parse_node_policy("spread"), NodePolicy::kSpread);
  EXPECT_FALSE(parse_node_policy("").ok());
  EXPECT_FALSE(parse_node_policy("numa").ok());
}

TEST(Options, WeightsAcceptUpstreamsForms) {
  EXPECT_EQ(*parse_scoring_weights("memory=3,slot=1,core=1"), (ScoringWeights{1, 1, 3}));
  EXPECT_EQ(*parse_scoring_weights(" slot = +2 , core=0,memory=0"), (ScoringWeights{2, 0, 0}));
}

TEST(Options, ListParsing) {
  EXPECT_EQ(parse_list(" a ,,b,"), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(parse_list("").empty());
  EXPECT_TRUE(parse_list(" , ,").empty());
}

}  // namespace
}  // namespace hami::fit
