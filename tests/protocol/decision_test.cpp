// Who may decide a pod's GPUs: signatures over the decision, and which pods'
// decisions a daemon honours with and without a key.
#include "protocol/decision.hpp"

#include <gtest/gtest.h>

#include <fstream>

#include "support/temp_dir.hpp"

namespace hami::protocol {
namespace {

const std::string kKey(40, 'k');

DecisionKeys keys(const std::string& text = kKey) {
  auto k = DecisionKeys::parse(text, "test");
  EXPECT_TRUE(k) << k.error().message;
  return *k;
}

k8s::Pod bound_pod(const std::string& scheduler = "hami-scheduler") {
  k8s::Pod p;
  p.meta = {.name = "p", .ns = "team-a", .uid = "8f7c1d2e-0000-4000-8000-000000000001"};
  p.meta.annotations = {{kAssignedNode, "node-1"}, {kDevicesAllocated, "GPU-a,NVIDIA,1000,10:;"}};
  p.node_name = "node-1";
  p.scheduler_name = scheduler;
  return p;
}

k8s::Pod signed_pod(const DecisionKeys& k) {
  k8s::Pod p = bound_pod();
  p.meta.annotations[kDecisionSignature] = k.sign(decision_of(p));
  return p;
}

TEST(DecisionTest, SignatureCoversEveryFieldOfTheDecision) {
  const DecisionKeys k = keys();
  const Decision d{"uid", "ns", "name", "node", "GPU-a,NVIDIA,1000,10:;"};
  const std::string sig = k.sign(d);
  EXPECT_EQ(sig.rfind("v1:", 0), 0u);
  EXPECT_TRUE(k.verify(d, sig));
  for (std::string Decision::*f :
       {&Decision::uid, &Decision::ns, &Decision::name, &Decision::node, &Decision::devices}) {
    Decision other = d;
    other.*f += "x";
    EXPECT_FALSE(k.verify(other, sig));
  }
  // Fields are not merely concatenated: moving a byte between two changes it.
  EXPECT_FALSE(k.verify({"uid", "nsn", "ame", "node", d.devices}, sig));
  EXPECT_FALSE(keys(std::string(40, 'x')).verify(d, sig));
  for (const char* bad : {"", "v1:", "v2:", "v1:!!!", "v1:AAAA"})
    EXPECT_FALSE(k.verify(d, bad)) << bad;
}

// Dynamic MIG: the profile and placement the scheduler chose are signed; the
// fields the device plugin adds once it has made the instance are not.
TEST(DecisionTest, SignatureCoversTheSchedulersPartOfTheMigAllocations) {
  const DecisionKeys k = keys();
  k8s::Pod p = bound_pod();
  const std::string before = k.sign(decision_of(p));
  const std::string chosen =
      R"([{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-a","profile":"3g.40gb",)"
      R"("placement":{"start":4,"size":4}}])";
  p.meta.annotations[kMigAllocations] = chosen;
  const std::string sig = k.sign(decision_of(p));
  EXPECT_NE(sig, before);
  // A pod without the annotation signs as it always did.
  p.meta.annotations.erase(kMigAllocations);
  EXPECT_TRUE(k.verify(decision_of(p), before));
  EXPECT_FALSE(k.verify(decision_of(p), sig));
  // The plugin's additions keep the signature.
  p.meta.annotations[kMigAllocations] =
      R"([{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-a","profile":"3g.40gb",)"
      R"("placement":{"start":4,"size":4},"migUUID":"MIG-1","gpuInstanceID":2,)"
      R"("computeInstanceID":0}])";
  EXPECT_TRUE(k.verify(decision_of(p), sig));
  // Another profile, placement or GPU does not.
  for (
      const char* forged :
      {R"([{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-a","profile":"7g.80gb","placement":{"start":0,"size":8}}])",
       R"([{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-a","profile":"3g.40gb","placement":{"start":0,"size":4}}])",
       R"([{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-b","profile":"3g.40gb","placement":{"start":4,"size":4}}])",
       "not json"}) {
    p.meta.annotations[kMigAllocations] = forged;
    EXPECT_FALSE(k.verify(decision_of(p), sig)) << forged;
  }
  EXPECT_EQ(mig_scheduler_part("not json"), "not json");
}

TEST(DecisionTest, KeysRollOver) {
  const DecisionKeys old_key = keys();
  const DecisionKeys both = keys(std::string(40, 'n') + "\n" + kKey + "\n");
  const Decision d{"uid", "ns", "name", "node", "x"};
  EXPECT_TRUE(both.verify(d, old_key.sign(d)));
  EXPECT_TRUE(both.verify(d, both.sign(d)));
  EXPECT_FALSE(old_key.verify(d, both.sign(d)));
}

TEST(DecisionTest, ShortOrMissingKeysAreRefusedWithTheFix) {
  auto shortk = DecisionKeys::parse("abc", "decision key file /k");
  ASSERT_FALSE(shortk);
  EXPECT_EQ(shortk.error().message.rfind("decision key file /k: line 1: a decision key of 3 bytes "
                                         "is too short (at least 32",
                                         0),
            0u)
      << shortk.error().message;
  EXPECT_FALSE(DecisionKeys::parse(" \n\n", "f"));
  auto missing = DecisionKeys::load("/nonexistent/key");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("/nonexistent/key: cannot be read"), std::string::npos);
  test::TempDir dir;
  std::ofstream(dir.file("key")) << kKey << "\n";
  auto loaded = DecisionKeys::load(dir.file("key"));
  ASSERT_TRUE(loaded);
  const Decision d{"u", "n", "p", "node", "x"};
  EXPECT_TRUE(loaded->verify(d, keys().sign(d)));
}

TEST(DecisionTest, WithAKeyOnlySignedDecisionsOfBoundPodsAreHonoured) {
  const DecisionTrust trust{.keys = keys(), .unsigned_schedulers = {}};
  EXPECT_EQ(decision_refusal(signed_pod(*trust.keys), trust), "");
  // Unsigned, whatever its scheduler says.
  const std::string unsigned_why = decision_refusal(bound_pod(), trust);
  EXPECT_NE(unsigned_why.find("pod team-a/p carries a GPU decision"), std::string::npos);
  EXPECT_NE(unsigned_why.find("without hami.io/decision-signature"), std::string::npos);
  // Altered after signing, or its signature moved to a pod re-created under
  // the same name.
  k8s::Pod raised = signed_pod(*trust.keys);
  raised.meta.annotations[kDevicesAllocated] = "GPU-a,NVIDIA,80000,100:;";
  EXPECT_NE(decision_refusal(raised, trust).find("does not match the pod's UID, node and devices"),
            std::string::npos);
  k8s::Pod again = signed_pod(*trust.keys);
  again.meta.uid = "8f7c1d2e-0000-4000-8000-000000000002";
  EXPECT_NE(decision_refusal(again, trust), "");
  // Not bound, or bound elsewhere than the decision says.
  k8s::Pod unbound = signed_pod(*trust.keys);
  unbound.node_name.clear();
  EXPECT_NE(decision_refusal(unbound, trust).find("is not bound to a node"), std::string::npos);
  k8s::Pod moved = signed_pod(*trust.keys);
  moved.node_name = "node-2";
  EXPECT_NE(decision_refusal(moved, trust).find("is bound to node node-2 but carries"),
            std::string::npos);
}

TEST(DecisionTest, UnsignedDecisionsOfTrustedSchedulersOnly) {
  const DecisionTrust without_key;  // the daemons' default without a key
  EXPECT_EQ(decision_refusal(bound_pod(), without_key), "");
  EXPECT_NE(decision_refusal(bound_pod("nobody"), without_key)
                .find("its scheduler \"nobody\" is not trusted to decide unsigned"),
            std::string::npos);
  const DecisionTrust mixed{.keys = keys(), .unsigned_schedulers = {"hami-upstream"}};
  EXPECT_EQ(decision_refusal(bound_pod("hami-upstream"), mixed), "");
  // A bad signature is not excused by a trusted name.
  k8s::Pod bad = bound_pod("hami-upstream");
  bad.meta.annotations[kDecisionSignature] = "v1:AAAA";
  EXPECT_NE(decision_refusal(bad, mixed), "");
}

TEST(DecisionTest, NameLists) {
  EXPECT_EQ(parse_name_list(""), std::vector<std::string>{});
  EXPECT_EQ(parse_name_list(" a, ,b ,"), (std::vector<std::string>{"a", "b"}));
}

}  // namespace
}  // namespace hami::protocol
