// The extender wire format as kube-scheduler sends it: capitalised Go field
// names (any case accepted), NodeNames and Nodes forms, and the answers.
#include <gtest/gtest.h>

#include "scheduler/protocol.hpp"

namespace hami::scheduler {
namespace {

using nlohmann::json;

// What kube-scheduler 1.29 sends with nodeCacheCapable: true (trimmed pod).
constexpr const char* kNodeNamesBody =
    R"({"Pod":{"metadata":{"name":"gpu-pod","namespace":"default",
"uid":"8f7c1d2e-0000-4000-8000-000000000001","annotations":{"hami.io/node-scheduler-policy":"spread"}},
"spec":{"containers":[{"name":"c","image":"cuda","resources":{"limits":{"nvidia.com/gpu":"1",
"nvidia.com/gpumem":"3000"}}}],"schedulerName":"hami-scheduler"},"status":{"phase":"Pending"}},
"Nodes":null,"NodeNames":["node-1","node-2"]})";

TEST(ProtocolTest, NodeNamesForm) {
  auto a = parse_extender_args(kNodeNamesBody);
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->pod.meta.name, "gpu-pod");
  EXPECT_EQ(a->pod.containers[0].limits.at("nvidia.com/gpumem"), "3000");
  EXPECT_EQ(a->node_names, (std::vector<std::string>{"node-1", "node-2"}));
  EXPECT_FALSE(a->node_items);

  FilterResult r;
  r.nodes = {"node-2"};
  r.failed = {{"node-1", "1/8 CardInsufficientMemory"}};
  json out = json::parse(filter_result_json(*a, r));
  EXPECT_EQ(out["NodeNames"], json::array({"node-2"}));
  EXPECT_TRUE(out["Nodes"].is_null());
  EXPECT_EQ(out["FailedNodes"]["node-1"], "1/8 CardInsufficientMemory");
  EXPECT_EQ(out["Error"], "");
}

TEST(ProtocolTest, NodesFormAnswersWithTheFittingItems) {
  json body = json::parse(kNodeNamesBody);
  body.erase("NodeNames");
  body["Nodes"] = {{"metadata", json::object()},
                   {"items",
                    {{{"metadata", {{"name", "node-1"}, {"labels", {{"x", "1"}}}}}},
                     {{"metadata", {{"name", "node-2"}}}}}}};
  auto a = parse_extender_args(body.dump());
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->node_names, (std::vector<std::string>{"node-1", "node-2"}));
  FilterResult r;
  r.nodes = {"node-1"};
  json out = json::parse(filter_result_json(*a, r));
  ASSERT_EQ(out["Nodes"]["items"].size(), 1u);
  EXPECT_EQ(out["Nodes"]["items"][0]["metadata"]["labels"]["x"], "1");
  EXPECT_TRUE(out["NodeNames"].is_null());
}

TEST(ProtocolTest, FieldNamesMatchCaseInsensitively) {
  auto a = parse_extender_args(
      R"({"pod":{"metadata":{"name":"p"},"spec":{"containers":[]}},"nodenames":["x"]})");
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->node_names, std::vector<std::string>{"x"});
  auto b = parse_binding_args(R"({"podName":"p","PODNAMESPACE":"ns","PodUID":"u","node":"n"})");
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_EQ(b->name, "p");
  EXPECT_EQ(b->ns, "ns");
  EXPECT_EQ(b->uid, "u");
  EXPECT_EQ(b->node, "n");
}

TEST(ProtocolTest, BindingArgsAsKubeSchedulerSendsThem) {
  auto b = parse_binding_args(
      R"({"PodName":"gpu-pod","PodNamespace":"default","PodUID":"8f7c","Node":"node-1"})");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->node, "node-1");
  EXPECT_EQ(json::parse(binding_result_json(""))["Error"], "");
  EXPECT_EQ(json::parse(binding_result_json("x"))["Error"], "x");
}

struct BadCase {
  const char* name;
  const char* body;
  const char* message;
};

class BadBodyTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadBodyTest, ClearError) {
  auto a = parse_extender_args(GetParam().body);
  ASSERT_FALSE(a);
  EXPECT_NE(a.error().message.find(GetParam().message), std::string::npos) << a.error().message;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadBodyTest,
    ::testing::Values(BadCase{"not_json", "{", "not valid JSON"},
                      BadCase{"array", "[]", "not a JSON object"},
                      BadCase{"no_pod", R"({"NodeNames":[]})", "Pod: missing"},
                      BadCase{"names_not_array", R"({"Pod":{},"NodeNames":"a"})",
                              "NodeNames: not an array"},
                      BadCase{"name_not_string", R"({"Pod":{},"NodeNames":[1]})", "not a string"},
                      BadCase{"nodes_no_items", R"({"Pod":{},"Nodes":{"x":1}})", "NodeList"},
                      BadCase{"pod_wrong_type", R"({"Pod":{"metadata":{"name":5}}})", "Pod:"}),
    [](const auto& pi) { return std::string(pi.param.name); });

// parse_extender_args reads the usual bodies with a fast scan and falls back
// to the complete parse for the rest: whichever path a body takes, the result
// (or the error) is the complete parse's.
class BothParsesTest : public ::testing::TestWithParam<const char*> {};

TEST_P(BothParsesTest, AgreeWithTheCompleteParse) {
  const std::string body = GetParam();
  auto fast = parse_extender_args(body);
  auto full = parse_extender_args_full(body);
  ASSERT_EQ(static_cast<bool>(fast), static_cast<bool>(full))
      << (fast ? full.error().message : fast.error().message);
  if (!fast) {
    EXPECT_EQ(fast.error().message, full.error().message);
    return;
  }
  EXPECT_TRUE(fast->pod == full->pod);
  EXPECT_EQ(fast->node_names, full->node_names);
  EXPECT_EQ(fast->node_items, full->node_items);
}

INSTANTIATE_TEST_SUITE_P(
    Bodies, BothParsesTest,
    ::testing::Values(
        kNodeNamesBody, R"({"Pod":{"metadata":{"name":"p"}},"NodeNames":[]})",
        R"(  {  "Pod" : {"metadata":{"name":"p"}} , "NodeNames" : [ "a" , "b" ] }  )",
        R"({"pod":{"metadata":{"name":"lower"}},"nodenames":["a"]})",
        R"({"Pod":{"metadata":{"name":"p"}},"NodeNames":["a\u002db","c\"d","\u00e9"]})",
        R"({"Pod":{"metadata":{"name":"p"}},"NodeNames":["a"],"NodeNames":["b"]})",
        R"({"Pod":{"metadata":{"name":"p"}},"NodeNames":["a"],"nodeNames":null})",
        R"({"Pod":{"metadata":{"name":"p"}},"NodeNames":null,"Nodes":{"items":[{"metadata":{"name":"n"}}]}})",
        R"({"Pod":{"metadata":{"name":"first"}},"Pod":{"metadata":{"name":"second"}},"NodeNames":["a"]})",
        R"({"Pod":{"metadata":{"name":"p"}},"Extra":1,"More":[1,{"a":"]}"}],"X":true,"NodeNames":["a"]})",
        R"({"Pod":{"metadata":{"name":"p"}},"Extra":1})",
        R"({"Pod":{"metadata":{"name":"p"}},"N":1e5})",
        R"({"Pod":{"metadata":{"name":"p"}},"NodeNames":["a"]} trailing)",
        R"({"Pod":{"metadata":{"name":"p"}},"NodeNames":["a",]})",
        R"({"Pod":{"metadata":{"name":"p"}},"NodeNames":["a" "b"]})",
        R"({"Pod":{"metadata":{"name":"p"}},"NodeNames":["a"],})",
        R"({"Pod":{"metadata":{"name":"p"}} "NodeNames":["a"]})",
        R"({"Pod":{"metadata":{"name":"p"}},"NodeNames":["a"])",
        R"({"Pod":{"metadata":{"name":"p"}},"NodeNames":["a])",
        R"({"Pod":{"metadata":{"name":"p"}},"Bad":[1,2}],"NodeNames":["a"]})",
        R"({"Pod":{"metadata":{"name":"p"}},"Bad":01,"NodeNames":["a"]})",
        R"({"Pod":{"metadata":{"name":"p"}},"Bad":tru,"NodeNames":["a"]})",
        R"({"Pod":{"metadata":{"name":"p"}},"NodeNames":[1]})",
        R"({"Pod":{"metadata":{"name":5}},"NodeNames":["a"]})", R"({"NodeNames":["a"]})", "{}", "",
        "[]", "{", R"({"Pod":{}})"));

TEST(ProtocolTest, DeepOrHugeBodiesAreRefusedBeforeTheParse) {
  std::string deep = R"({"Pod":)";
  for (int i = 0; i < 100000; ++i)
    deep += "[";
  for (auto* parse : {&parse_extender_args, &parse_extender_args_full}) {
    auto a = (*parse)(deep);
    ASSERT_FALSE(a);
    EXPECT_EQ(a.error().message, "ExtenderArgs: JSON nested deeper than 64 levels (at byte 70)");
  }
  std::string names = R"({"Pod":{},"NodeNames":[)";
  for (int i = 0; i < 1000000; ++i)
    names += "\"n\",";
  names += "\"n\"]}";
  auto a = parse_extender_args(names);
  ASSERT_FALSE(a);
  EXPECT_NE(a.error().message.find("more than 1000000 values"), std::string::npos);
  auto big = parse_extender_args(std::string(kMaxExtenderBody + 1, ' '));
  ASSERT_FALSE(big);
  EXPECT_NE(big.error().message.find("over the limit"), std::string::npos);
  auto bind = parse_binding_args(R"({"PodName":"p","Node":"n","X":")" +
                                 std::string(kMaxBindingBody, 'x') + "\"}");
  ASSERT_FALSE(bind);
  EXPECT_NE(bind.error().message.find("over the limit"), std::string::npos);
}

TEST(ProtocolTest, BadBindingArgs) {
  EXPECT_FALSE(parse_binding_args(R"({"PodName":"p"})"));  // no Node
  EXPECT_FALSE(parse_binding_args(R"({"PodName":5,"Node":"n"})"));
  EXPECT_FALSE(parse_binding_args("nope"));
}

TEST(ProtocolTest, PrioritiesAreHostAndScore) {
  json out = json::parse(priorities_json({{"a", 3}, {"b", 10}}));
  EXPECT_EQ(out, json::parse(R"([{"Host":"a","Score":3},{"Host":"b","Score":10}])"));
}

}  // namespace
}  // namespace hami::scheduler
