// Typed views of Pods and Nodes, quantities, timestamps, base64 and paths:
// the parsers of what the API server, the scheduler and webhooks send us.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <nlohmann/json.hpp>

#include "k8s/base64.hpp"
#include "k8s/objects.hpp"
#include "k8s/paths.hpp"
#include "k8s/time.hpp"

namespace hami::k8s {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

json sample_pod() {
  return json::parse(R"({
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {
      "name": "trainer", "namespace": "ml", "uid": "u-1", "resourceVersion": "42",
      "labels": {"app": "train"},
      "annotations": {"hami.io/vgpu-node": "n1"},
      "creationTimestamp": "2024-05-01T10:00:00Z",
      "deletionTimestamp": "2024-05-01T10:05:00.5+02:00"
    },
    "spec": {
      "nodeName": "n1", "schedulerName": "hami-scheduler",
      "initContainers": [{"name": "init", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
      "containers": [
        {"name": "main",
         "resources": {"limits": {"nvidia.com/gpu": "2", "nvidia.com/gpumem": "3000"},
                       "requests": {"cpu": "500m"}},
         "env": [{"name": "CUDA_DISABLE_CONTROL", "value": "true"},
                 {"name": "FROM_SECRET", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
                 {"name": "EMPTY"}]},
        {"name": "sidecar", "resources": null}
      ]
    },
    "status": {"phase": "Running"}
  })");
}

TEST(Objects, PodFields) {
  auto pod = Pod::from_json(sample_pod());
  ASSERT_TRUE(pod) << pod.error().message;
  EXPECT_EQ(pod->meta.name, "trainer");
  EXPECT_EQ(pod->meta.ns, "ml");
  EXPECT_EQ(pod->meta.uid, "u-1");
  EXPECT_EQ(pod->meta.resource_version, "42");
  EXPECT_EQ(pod->meta.labels.at("app"), "train");
  EXPECT_EQ(pod->meta.annotations.at("hami.io/vgpu-node"), "n1");
  ASSERT_TRUE(pod->meta.creation_timestamp);
  EXPECT_EQ(format_time(*pod->meta.creation_timestamp), "2024-05-01T10:00:00Z");
  ASSERT_TRUE(pod->meta.deletion_timestamp);
  EXPECT_EQ(format_micro_time(*pod->meta.deletion_timestamp), "2024-05-01T08:05:00.500000Z");
  EXPECT_EQ(pod->node_name, "n1");
  EXPECT_EQ(pod->scheduler_name, "hami-scheduler");
  ASSERT_EQ(pod->init_containers.size(), 1u);
  EXPECT_EQ(pod->init_containers[0].limits.at("nvidia.com/gpu"), "1");
  ASSERT_EQ(pod->containers.size(), 2u);
  const Container& c = pod->containers[0];
  EXPECT_EQ(c.name, "main");
  EXPECT_EQ(c.limits.at("nvidia.com/gpumem"), "3000");
  EXPECT_EQ(c.requests.at("cpu"), "500m");
  ASSERT_EQ(c.env.size(), 3u);
  EXPECT_EQ(c.env[0].name, "CUDA_DISABLE_CONTROL");
  EXPECT_EQ(c.env[0].value, "true");
  EXPECT_EQ(c.env[1].value, std::nullopt);  // from a secret: not known here
  EXPECT_EQ(c.env[2].value, "");
  EXPECT_TRUE(pod->containers[1].limits.empty());
  EXPECT_EQ(pod->phase, "Running");
}

TEST(Objects, MinimalPodHasZeroValues) {
  auto pod = Pod::from_json(json::parse(R"({"metadata": {"generateName": "x-"}})"));
  ASSERT_TRUE(pod) << pod.error().message;
  EXPECT_EQ(pod->meta.name, "");
  EXPECT_FALSE(pod->meta.creation_timestamp);
  EXPECT_TRUE(pod->containers.empty());
  EXPECT_EQ(pod->phase, "");
}

struct BadPod {
  const char* json_patch;  // merged into the sample pod
  const char* expect;
};

class PodTypeErrors : public ::testing::TestWithParam<BadPod> {};

TEST_P(PodTypeErrors, NameTheField) {
  json pod = sample_pod();
  pod.merge_patch(json::parse(GetParam().json_patch));
  auto r = Pod::from_json(pod);
  ASSERT_FALSE(r) << GetParam().json_patch;
  EXPECT_THAT(r.error().message, HasSubstr("pod ml/trainer: "));
  EXPECT_THAT(r.error().message, HasSubstr(GetParam().expect));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PodTypeErrors,
    ::testing::Values(
        BadPod{R"({"spec": {"containers": {"a": 1}}})",
               "spec.containers: expected array, got object"},
        BadPod{
            R"({"spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 2}}}]}})",
            "spec.containers[0].resources.limits[\"nvidia.com/gpu\"]: expected string, got number"},
        BadPod{R"({"spec": {"initContainers": [7]}})", "spec.initContainers[0]: expected object"},
        BadPod{R"({"spec": {"containers": [{"env": [{"value": "x"}]}]}})",
               "spec.containers[0].env[0].name: missing"},
        BadPod{R"({"spec": {"containers": [{"env": [{"name": "A", "value": 1}]}]}})",
               "spec.containers[0].env[0].value: expected string, got number"},
        BadPod{R"({"spec": {"nodeName": ["n1"]}})", "spec.nodeName: expected string, got array"},
        BadPod{R"({"spec": "x"})", "spec: expected object, got string"},
        BadPod{R"({"metadata": {"labels": ["a"]}})", "metadata.labels: expected object, got array"},
        BadPod{R"({"metadata": {"annotations": {"a": true}}})",
               "metadata.annotations[\"a\"]: expected string, got boolean"},
        BadPod{R"({"metadata": {"creationTimestamp": "yesterday"}})",
               "metadata.creationTimestamp: time \"yesterday\""},
        BadPod{R"({"status": {"phase": 3}})", "status.phase: expected string, got number"},
        BadPod{R"({"spec": {"securityContext": {"runAsUser": "1000"}}})",
               "spec.securityContext.runAsUser: expected integer, got string"},
        BadPod{R"({"spec": {"containers": [{"name": "c", "securityContext": 1}]}})",
               "spec.containers[0].securityContext: expected object, got number"}));

TEST(Objects, RunAsUserOfThePodAndItsContainers) {
  auto pod = Pod::from_json(json::parse(R"({"spec": {"securityContext": {"runAsUser": 1000},
      "containers": [{"name": "a"}, {"name": "b", "securityContext": {"runAsUser": 0}}]}})"));
  ASSERT_TRUE(pod) << pod.error().message;
  EXPECT_EQ(pod->run_as_user, 1000);
  EXPECT_FALSE(pod->containers[0].run_as_user);
  EXPECT_EQ(pod->containers[1].run_as_user, 0);
}

// What the scheduler extender needs to know before it binds a pod elsewhere
// than kube-scheduler chose: whether its place depends on other pods'.
TEST(Objects, PodPlacementDependingOnOtherPods) {
  auto with = [](const char* spec) {
    json p = json::parse(R"({"metadata": {"name": "p"}, "spec": )" + std::string(spec) + "}");
    auto pod = Pod::from_json(p);
    EXPECT_TRUE(pod) << pod.error().message;
    return pod && pod->placement_depends_on_other_pods;
  };
  EXPECT_FALSE(with(R"({"containers": [{"name": "c", "ports": [{"containerPort": 80}]}]})"));
  EXPECT_FALSE(with(R"({"affinity": {"nodeAffinity": {}}, "topologySpreadConstraints": []})"));
  EXPECT_TRUE(with(R"({"affinity": {"podAntiAffinity": {}}})"));
  EXPECT_TRUE(with(
      R"({"affinity": {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}}})"));
  EXPECT_TRUE(with(R"({"topologySpreadConstraints": [{"maxSkew": 1}]})"));
  EXPECT_TRUE(with(
      R"({"containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080}]}]})"));
  EXPECT_TRUE(with(R"({"initContainers": [{"name": "i", "ports": [{"hostPort": 53}]}]})"));
}

TEST(Objects, TopLevelMustBeAnObject) {
  auto r = Pod::from_json(json::array());
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message, HasSubstr("expected object, got array"));
  EXPECT_FALSE(Node::from_json(json("node")));
}

TEST(Objects, NodeFields) {
  auto node = Node::from_json(json::parse(R"({
    "metadata": {"name": "n1", "annotations": {"hami.io/node-nvidia-register": "[]"}},
    "spec": {"unschedulable": true},
    "status": {"capacity": {"nvidia.com/gpu": "10"}, "allocatable": {"nvidia.com/gpu": "8"},
               "conditions": [{"type": "MemoryPressure", "status": "False"},
                              {"type": "Ready", "status": "True"}]}})"));
  ASSERT_TRUE(node) << node.error().message;
  EXPECT_EQ(node->meta.name, "n1");
  EXPECT_EQ(node->meta.ns, "");
  EXPECT_TRUE(node->unschedulable);
  EXPECT_EQ(node->capacity.at("nvidia.com/gpu"), "10");
  EXPECT_EQ(node->allocatable.at("nvidia.com/gpu"), "8");
  EXPECT_EQ(node->ready, true);

  auto not_ready = Node::from_json(
      json::parse(R"({"status": {"conditions": [{"type": "Ready", "status": "False"}]}})"));
  ASSERT_TRUE(not_ready);
  EXPECT_EQ(not_ready->ready, false);
  auto unknown = Node::from_json(
      json::parse(R"({"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}})"));
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->ready, std::nullopt);

  auto bad = Node::from_json(json::parse(R"({"metadata": {"name": "n2"},
      "spec": {"unschedulable": "yes"}})"));
  ASSERT_FALSE(bad);
  EXPECT_THAT(bad.error().message, HasSubstr("node n2: spec.unschedulable: expected boolean"));
  auto bad_cond = Node::from_json(json::parse(R"({"status": {"conditions": {"Ready": 1}}})"));
  ASSERT_FALSE(bad_cond);
  EXPECT_THAT(bad_cond.error().message, HasSubstr("status.conditions: expected array"));
}

TEST(Time, FormatAndParse) {
  using namespace std::chrono;
  const TimePoint t =
      sys_days{2024y / 2 / 29} + hours(23) + minutes(59) + seconds(58) + microseconds(123456);
  EXPECT_EQ(format_micro_time(t), "2024-02-29T23:59:58.123456Z");
  EXPECT_EQ(format_time(t), "2024-02-29T23:59:58Z");
  EXPECT_EQ(*parse_time("2024-02-29T23:59:58.123456Z"), t);
  EXPECT_EQ(*parse_time("2024-03-01T01:59:58.123456789+02:00"), t);
  EXPECT_EQ(*parse_time("2024-02-29T23:59:58Z"), t - microseconds(123456));
  for (const char* bad :
       {"", "2024-02-29", "2024-02-29T23:59:58", "2024-13-01T00:00:00Z", "2024-02-29T23:59:58.Z",
        "2024-02-29T23:59:58Zjunk", "2024-02-29 23:59:58Z", "2024-02-29T23:59:58+0200",
        // Found by fuzzing: outside what a time_point can hold.
        "1012-05-01T10:05:00Z", "9999-12-31T23:59:59Z"}) {
    EXPECT_FALSE(parse_time(bad)) << bad;
  }
}

TEST(Base64, RoundTripAndRejects) {
  for (const std::string& s :
       std::vector<std::string>{"", "a", "ab", "abc", "abcd", std::string("\0\xff\x10", 3)}) {
    auto back = base64_decode(base64_encode(s));
    ASSERT_TRUE(back) << s;
    EXPECT_EQ(*back, s);
  }
  EXPECT_EQ(base64_encode("hami"), "aGFtaQ==");
  EXPECT_EQ(*base64_decode("aGFt\naQ==\n"), "hami");  // wrapped lines
  for (const char* bad : {"aGFtaQ=", "aGFtaQ===", "aGF*aQ==", "aQ==aQ==", "aR=="}) {
    EXPECT_FALSE(base64_decode(bad)) << bad;
  }
}

TEST(Paths, CoreAndGrouped) {
  EXPECT_EQ(core_path("pods"), "/api/v1/pods");
  EXPECT_EQ(pod_path("default", "x"), "/api/v1/namespaces/default/pods/x");
  EXPECT_EQ(core_path("pods", "default", "x", "binding"),
            "/api/v1/namespaces/default/pods/x/binding");
  EXPECT_EQ(node_path("gpu-1"), "/api/v1/nodes/gpu-1");
  EXPECT_EQ(lease_path("kube-system", "hami"),
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/hami");
  EXPECT_EQ(group_path("apps", "v1", "deployments"), "/apis/apps/v1/deployments");
  EXPECT_EQ(url_encode("a b/c?d=e&f"), "a%20b%2Fc%3Fd%3De%26f");
}

}  // namespace
}  // namespace hami::k8s
