// The client against the test API server over real HTTPS: CRUD and its
// errors, pagination, selectors, patches with conflict retry, binding,
// authentication and TLS failures, retries and timeouts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "fixture.hpp"
#include "k8s/objects.hpp"
#include "support/apiserver/certs.hpp"
#include "test_env.hpp"

namespace hami::k8s {
namespace {

using nlohmann::json;
using test::ApiFixture;
using test::make_node;
using test::make_pod;
using ::testing::HasSubstr;

class ClientTest : public ApiFixture {
 protected:
  std::set<std::string> names(const ObjectList& list) {
    std::set<std::string> out;
    for (const auto& item : list.items)
      out.insert(item["metadata"]["name"].get<std::string>());
    return out;
  }
  std::set<std::string> list_names(const ListOptions& o) {
    auto r = client().list(pod_path("default"), o);
    EXPECT_TRUE(r) << r.error().message;
    return r ? names(*r) : std::set<std::string>{};
  }
};

TEST_F(ClientTest, CreateGetUpdateDelete) {
  auto created = client().create(pod_path("default"), make_pod("p", {{"app", "a"}}));
  ASSERT_TRUE(created) << created.error().message;
  auto pod = Pod::from_json(*created);
  ASSERT_TRUE(pod) << pod.error().message;
  EXPECT_FALSE(pod->meta.uid.empty());
  EXPECT_FALSE(pod->meta.resource_version.empty());
  EXPECT_TRUE(pod->meta.creation_timestamp);
  EXPECT_EQ(pod->phase, "Pending");

  auto got = client().get(pod_path("default", "p"));
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(*got, *created);

  json changed = *got;
  changed["metadata"]["labels"]["app"] = "b";
  auto updated = client().update(pod_path("default", "p"), changed);
  ASSERT_TRUE(updated) << updated.error().message;
  EXPECT_EQ((*updated)["metadata"]["labels"]["app"], "b");
  EXPECT_NE((*updated)["metadata"]["resourceVersion"], (*got)["metadata"]["resourceVersion"]);

  // The same stale object again: the precondition fails.
  auto stale = client().update(pod_path("default", "p"), changed);
  ASSERT_FALSE(stale);
  EXPECT_TRUE(stale.error().conflict());
  EXPECT_EQ(stale.error().status, 409);
  EXPECT_EQ(stale.error().reason, "Conflict");
  EXPECT_THAT(stale.error().message,
              HasSubstr("PUT /api/v1/namespaces/default/pods/p: 409 Conflict"));
  EXPECT_THAT(stale.error().message, HasSubstr("the object has been modified"));

  auto deleted = client().del(pod_path("default", "p"));
  ASSERT_TRUE(deleted) << deleted.error().message;
  auto gone = client().get(pod_path("default", "p"));
  ASSERT_FALSE(gone);
  EXPECT_TRUE(gone.error().not_found());
  EXPECT_EQ(gone.error().reason, "NotFound");
  EXPECT_THAT(gone.error().message, HasSubstr("404 NotFound: pods \"p\" not found"));
  EXPECT_FALSE(client().del(pod_path("default", "p")).ok());
  // Nothing was retried: these errors are answers, not failures.
  EXPECT_EQ(api().requests("get"), 2u);
}

TEST_F(ClientTest, CreateTwiceIsAlreadyExists) {
  ASSERT_TRUE(client().create(pod_path("default"), make_pod("p")));
  auto again = client().create(pod_path("default"), make_pod("p"));
  ASSERT_FALSE(again);
  EXPECT_TRUE(again.error().already_exists());
  EXPECT_FALSE(again.error().conflict());
  EXPECT_THAT(again.error().message, HasSubstr("pods \"p\" already exists"));
}

TEST_F(ClientTest, ClusterScopedAndGroupedResources) {
  ASSERT_TRUE(client().create(node_path(), make_node("gpu-1")));
  auto node = client().get(node_path("gpu-1"));
  ASSERT_TRUE(node) << node.error().message;
  EXPECT_EQ((*node)["kind"], "Node");
  json lease = {{"metadata", {{"name", "l"}}}, {"spec", {{"holderIdentity", "me"}}}};
  auto created = client().create(lease_path("kube-system"), lease);
  ASSERT_TRUE(created) << created.error().message;
  EXPECT_EQ((*created)["apiVersion"], "coordination.k8s.io/v1");
  EXPECT_EQ((*created)["metadata"]["namespace"], "kube-system");
  auto unknown = client().get("/apis/example.com/v1/widgets");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().status, 404);
}

TEST_F(ClientTest, ListFollowsContinueToTheEnd) {
  for (int i = 0; i < 25; ++i)
    api().put("pods", make_pod(std::string("p").append(std::to_string(100 + i))));
  api().put("pods", make_pod("elsewhere", {}, "", "other"));
  auto list = client().list(pod_path("default"), {.limit = 10});
  ASSERT_TRUE(list) << list.error().message;
  EXPECT_EQ(list->items.size(), 25u);
  EXPECT_EQ(list->resource_version, std::to_string(api().resource_version()));
  EXPECT_EQ(api().requests("list"), 3u);
  // Items come back looking like watched objects.
  EXPECT_EQ(list->items[0]["kind"], "Pod");
  EXPECT_EQ(list->items[0]["apiVersion"], "v1");
  auto all = client().list(core_path("pods"));
  ASSERT_TRUE(all);
  EXPECT_EQ(all->items.size(), 26u);
}

TEST_F(ClientTest, PagesComeFromOneSnapshot) {
  for (const char* n : {"a", "b", "c", "d"})
    api().put("pods", make_pod(n));
  auto first = client().get(pod_path("default") + "?limit=2");
  ASSERT_TRUE(first) << first.error().message;
  ASSERT_EQ((*first)["items"].size(), 2u);
  const std::string cont = (*first)["metadata"]["continue"];
  // Changes after the first page are not in the later pages.
  api().remove("pods", "default", "c");
  api().put("pods", make_pod("e"));
  auto second = client().get(pod_path("default") + "?limit=2&continue=" + url_encode(cont));
  ASSERT_TRUE(second) << second.error().message;
  ASSERT_EQ((*second)["items"].size(), 2u);
  EXPECT_EQ((*second)["items"][0]["metadata"]["name"], "c");
  EXPECT_EQ((*second)["items"][1]["metadata"]["name"], "d");
  EXPECT_EQ((*second)["metadata"]["resourceVersion"], (*first)["metadata"]["resourceVersion"]);
  // Once the snapshot is compacted away the token expires.
  api().compact();
  auto expired = client().get(pod_path("default") + "?limit=2&continue=" + url_encode(cont));
  ASSERT_FALSE(expired);
  EXPECT_TRUE(expired.error().gone());
  EXPECT_EQ(expired.error().reason, "Expired");
}

TEST_F(ClientTest, ListStartsOverWhenTheContinueTokenExpires) {
  for (int i = 0; i < 5; ++i)
    api().put("pods", make_pod(std::string("p").append(std::to_string(i))));
  api().inject({.verb = "list", .path_prefix = pod_path("default"), .status = 410, .skip = 1});
  auto list = client().list(pod_path("default"), {.limit = 2});
  ASSERT_TRUE(list) << list.error().message;
  EXPECT_EQ(list->items.size(), 5u);
  EXPECT_EQ(api().requests("list"), 3u);  // page 1, the expired page 2, one full list
}

TEST_F(ClientTest, LabelSelectors) {
  api().put("pods", make_pod("a", {{"app", "web"}, {"tier", "front"}}));
  api().put("pods", make_pod("b", {{"app", "web"}, {"tier", "db"}}));
  api().put("pods", make_pod("c", {{"app", "batch"}}));
  api().put("pods", make_pod("d"));
  using S = std::set<std::string>;
  EXPECT_EQ(list_names({.label_selector = "app=web"}), (S{"a", "b"}));
  EXPECT_EQ(list_names({.label_selector = "app==web,tier=db"}), (S{"b"}));
  EXPECT_EQ(list_names({.label_selector = "app!=web"}), (S{"c", "d"}));
  EXPECT_EQ(list_names({.label_selector = "tier"}), (S{"a", "b"}));
  EXPECT_EQ(list_names({.label_selector = "!tier"}), (S{"c", "d"}));
  EXPECT_EQ(list_names({.label_selector = "app in (batch, web),tier notin (db)"}), (S{"a", "c"}));
  auto bad = client().list(pod_path("default"), {.label_selector = "a=b=c=("});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().status, 400);
}

TEST_F(ClientTest, FieldSelectors) {
  api().put("pods", make_pod("bound", {}, "n1"));
  api().put("pods", make_pod("other-node", {}, "n2"));
  json running = make_pod("running", {}, "n1");
  running["status"]["phase"] = "Running";
  api().put("pods", running);
  api().put("pods", make_pod("pending"));
  using S = std::set<std::string>;
  EXPECT_EQ(list_names({.field_selector = "spec.nodeName=n1"}), (S{"bound", "running"}));
  EXPECT_EQ(list_names({.field_selector = "spec.nodeName="}), (S{"pending"}));
  EXPECT_EQ(list_names({.field_selector = "spec.nodeName=n1,status.phase!=Running"}), (S{"bound"}));
  EXPECT_EQ(list_names({.field_selector = "metadata.name==pending"}), (S{"pending"}));
  auto bad = client().list(pod_path("default"), {.field_selector = "spec.hostname=x"});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().status, 400);
  EXPECT_THAT(bad.error().message, HasSubstr("field label not supported: spec.hostname"));
}

TEST_F(ClientTest, PatchAnnotationsSetsAndRemoves) {
  json pod = make_pod("p", {{"app", "a"}});
  pod["metadata"]["annotations"] = {{"keep", "1"}, {"drop", "2"}};
  api().put("pods", pod);
  auto r = client().patch_annotations(
      pod_path("default", "p"), {{"hami.io/bind-phase", "allocating"}, {"drop", std::nullopt}});
  ASSERT_TRUE(r) << r.error().message;
  const json& ann = (*r)["metadata"]["annotations"];
  EXPECT_EQ(ann, (json{{"keep", "1"}, {"hami.io/bind-phase", "allocating"}}));
  EXPECT_EQ((*r)["metadata"]["labels"]["app"], "a");
  EXPECT_EQ(api().requests("patch"), 1u);
  EXPECT_EQ(api().requests("get"), 0u);  // no precondition: one request
}

TEST_F(ClientTest, MergePatchWithStaleResourceVersionConflicts) {
  const json pod = api().put("pods", make_pod("p"));
  const std::string old_rv = pod["metadata"]["resourceVersion"];
  api().put("pods", make_pod("p", {{"x", "y"}}));
  auto r =
      client().merge_patch(pod_path("default", "p"),
                           {{"metadata", {{"resourceVersion", old_rv}, {"labels", {{"a", "b"}}}}}});
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().conflict());
}

// A patch that names the pod's UID writes only that pod: one made again
// under the same name is refused (the real server: metadata.uid is
// immutable, 422), without a read first.
TEST_F(ClientTest, MergePatchPinnedToAUidRefusesAnotherObject) {
  const json first = api().put("pods", make_pod("p"));
  const std::string uid = first["metadata"]["uid"];
  auto same = client().merge_patch(pod_path("default", "p"),
                                   {{"metadata", {{"uid", uid}, {"labels", {{"a", "b"}}}}}});
  ASSERT_TRUE(same) << same.error().message;
  EXPECT_EQ((*same)["metadata"]["labels"]["a"], "b");
  ASSERT_TRUE(api().remove("pods", "default", "p"));
  api().put("pods", make_pod("p"));
  auto other = client().merge_patch(pod_path("default", "p"),
                                    {{"metadata", {{"uid", uid}, {"labels", {{"a", "c"}}}}}});
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().status, 422) << other.error().message;
  EXPECT_THAT(other.error().message, ::testing::HasSubstr("field is immutable"));
  EXPECT_FALSE((*api().get("pods", "default", "p"))["metadata"].contains("labels"));
  EXPECT_EQ(api().requests("get"), 0u);
}

TEST_F(ClientTest, PatchWithPreconditionRetriesAConflict) {
  api().put("pods", make_pod("p"));
  api().inject({.verb = "patch",
                .path_prefix = pod_path("default", "p"),
                .status = 409,
                .message = "the object has been modified"});
  auto r = client().patch_annotations(pod_path("default", "p"), {{"k", "v"}}, PatchRetry{});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ((*r)["metadata"]["annotations"]["k"], "v");
  EXPECT_EQ(api().requests("patch"), 2u);
  EXPECT_EQ(api().requests("get"), 2u);  // re-read before the second try
}

TEST_F(ClientTest, PatchWithPreconditionGivesUp) {
  api().put("pods", make_pod("p"));
  api().inject(
      {.verb = "patch", .path_prefix = pod_path("default", "p"), .status = 409, .count = -1});
  auto r = client().patch_annotations(pod_path("default", "p"), {{"k", "v"}},
                                      PatchRetry{.max_attempts = 3});
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().conflict());
  EXPECT_THAT(r.error().message, HasSubstr("still conflicting after 3 attempts"));
  EXPECT_EQ(api().requests("patch"), 3u);
  EXPECT_FALSE(api().get("pods", "default", "p")->at("metadata").contains("annotations"));
}

TEST_F(ClientTest, ReadModifyPatchSeesTheCurrentObject) {
  json pod = make_pod("p");
  pod["metadata"]["annotations"] = {{"hami.io/mutex.lock", "held"}};
  api().put("pods", pod);
  // The patch function refuses while the lock annotation is held...
  auto locked = client().read_modify_patch(
      pod_path("default", "p"), [](const json& cur) -> Result<std::optional<json>> {
        if (cur["metadata"]["annotations"].contains("hami.io/mutex.lock")) {
          return ApiError{ErrorKind::kInvalid, 0, "", "locked"};
        }
        return std::optional<json>(json{{"metadata", {{"annotations", {{"mine", "1"}}}}}});
      });
  ASSERT_FALSE(locked);
  EXPECT_EQ(locked.error().message, "locked");
  // ...and nothing to change sends no patch.
  auto same = client().read_modify_patch(
      pod_path("default", "p"),
      [](const json&) -> Result<std::optional<json>> { return std::optional<json>(); });
  ASSERT_TRUE(same);
  EXPECT_EQ(api().requests("patch"), 0u);
}

TEST_F(ClientTest, BindPod) {
  const json pod = api().put("pods", make_pod("p"));
  const std::string uid = pod["metadata"]["uid"];
  ASSERT_TRUE(client().bind_pod("default", "p", uid, "gpu-1"));
  auto bound = api().get("pods", "default", "p");
  EXPECT_EQ((*bound)["spec"]["nodeName"], "gpu-1");

  auto again = client().bind_pod("default", "p", uid, "gpu-2");
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().status, 409);
  EXPECT_THAT(again.error().message, HasSubstr("already assigned to node \"gpu-1\""));

  api().put("pods", make_pod("q"));
  auto wrong_uid = client().bind_pod("default", "q", "not-the-uid", "gpu-1");
  ASSERT_FALSE(wrong_uid);
  EXPECT_EQ(wrong_uid.error().status, 409);
  EXPECT_THAT(wrong_uid.error().message, HasSubstr("Precondition failed: UID"));
  auto missing = client().bind_pod("default", "nope", "", "gpu-1");
  ASSERT_FALSE(missing);
  EXPECT_TRUE(missing.error().not_found());
}

TEST_F(ClientTest, WrongTokenIsUnauthorized) {
  auto bad = connect(api().write_kubeconfig(dir_.file("bad"), {.token = "not-a-token"}));
  ASSERT_TRUE(bad);
  auto r = bad->get(pod_path("default", "p"));
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().unauthorized());
  EXPECT_EQ(r.error().kind, ErrorKind::kHttp);
  EXPECT_THAT(r.error().message, HasSubstr("401 Unauthorized"));
}

TEST_F(ClientTest, WrongCaFailsCertificateVerification) {
  test::CertAuthority other;
  auto bad = connect(api().write_kubeconfig(dir_.file("bad"), {.ca_pem = other.cert_pem()}));
  ASSERT_TRUE(bad);
  auto r = bad->get(pod_path("default", "p"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::kTls);
  EXPECT_EQ(r.error().status, 0);
  EXPECT_THAT(r.error().message, HasSubstr("certificate verification failed"));
  // OpenSSL's reason follows in parentheses.
  EXPECT_THAT(r.error().message, HasSubstr("certificate verification failed (self-signed"));
}

TEST_F(ClientTest, InsecureSkipTlsVerifyAcceptsAnyCertificate) {
  Config cfg;
  cfg.server = api().url();
  cfg.token = api().token();
  cfg.ca_pem = test::CertAuthority().cert_pem();  // the wrong CA, ignored
  cfg.insecure_skip_tls_verify = true;
  auto c = Client::from_config(cfg, test::fast_client_options());
  ASSERT_TRUE(c) << c.error().message;
  auto r = c->list(pod_path("default"));
  EXPECT_TRUE(r) << r.error().message;
}

TEST_F(ClientTest, TlsServerName) {
  auto ok = connect(
      api().write_kubeconfig(dir_.file("sni"), {.tls_server_name = "kubernetes.default.svc"}));
  ASSERT_TRUE(ok);
  EXPECT_TRUE(ok->list(pod_path("default")));
  auto wrong =
      connect(api().write_kubeconfig(dir_.file("wrong"), {.tls_server_name = "wrong.example"}));
  ASSERT_TRUE(wrong);
  auto r = wrong->list(pod_path("default"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::kTls);
  EXPECT_THAT(r.error().message, HasSubstr("not valid for wrong.example"));
}

TEST_F(ClientTest, ClientCertificateAndCaFile) {
  using Auth = test::KubeconfigOptions::Auth;
  auto c = connect(
      api().write_kubeconfig(dir_.file("cert"), {.auth = Auth::kClientCert, .inline_ca = false}));
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->config().token.empty());
  auto r = c->create(node_path(), make_node("n1"));
  EXPECT_TRUE(r) << r.error().message;
}

TEST_F(ClientTest, RotatedTokenFileIsPickedUp) {
  using Auth = test::KubeconfigOptions::Auth;
  auto c = connect(api().write_kubeconfig(dir_.file("kc"), {.auth = Auth::kTokenFile}));
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->list(pod_path("default")));
  // The old token expires; the kubelet writes a new one.
  api().revoke_token(api().token());
  auto expired = c->list(pod_path("default"));
  ASSERT_FALSE(expired);
  EXPECT_TRUE(expired.error().unauthorized());
  api().add_token("rotated");
  test::write_text(dir_.file("token.tmp"), "rotated\n");
  std::filesystem::rename(dir_.file("token.tmp"), dir_.file("token"));
  auto r = c->list(pod_path("default"));
  EXPECT_TRUE(r) << r.error().message;
}

TEST_F(ClientTest, InClusterConfigTalksToTheServer) {
  const std::string sa = dir_.file("sa");
  std::filesystem::create_directories(sa);
  test::write_text(sa + "/token", api().token() + "\n");
  test::write_text(sa + "/ca.crt", api().ca_pem());
  test::write_text(sa + "/namespace", "gpu\n");
  test::ScopedEnv host("KUBERNETES_SERVICE_HOST", "127.0.0.1");
  const std::string port = std::to_string(api().port());
  test::ScopedEnv port_env("KUBERNETES_SERVICE_PORT", port.c_str());
  auto cfg = Config::in_cluster(sa);
  ASSERT_TRUE(cfg) << cfg.error().message;
  auto c = Client::from_config(*cfg, test::fast_client_options());
  ASSERT_TRUE(c) << c.error().message;
  auto r = c->create(pod_path(cfg->default_namespace), make_pod("p", {}, "", "gpu"));
  EXPECT_TRUE(r) << r.error().message;
}

TEST_F(ClientTest, RetriesServerErrorsForIdempotentVerbs) {
  api().put("pods", make_pod("p"));
  api().inject({.verb = "get", .path_prefix = pod_path("default", "p"), .status = 500, .count = 2});
  auto r = client().get(pod_path("default", "p"));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(api().requests("get"), 3u);

  api().inject(
      {.verb = "get", .path_prefix = pod_path("default", "p"), .status = 503, .count = -1});
  auto never = client().get(pod_path("default", "p"));
  ASSERT_FALSE(never);
  EXPECT_EQ(never.error().status, 503);
  EXPECT_THAT(never.error().message, HasSubstr("gave up after 4 attempts"));
  EXPECT_EQ(api().requests("get"), 7u);
}

TEST_F(ClientTest, CreateIsNotRetriedOnServerErrorsButIsOn429) {
  api().inject({.verb = "create", .path_prefix = pod_path("default"), .status = 500});
  auto failed = client().create(pod_path("default"), make_pod("p"));
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().status, 500);
  EXPECT_EQ(api().requests("create"), 1u);

  api().inject({.verb = "create", .path_prefix = pod_path("default"), .status = 429});
  auto throttled = client().create(pod_path("default"), make_pod("p"));
  ASSERT_TRUE(throttled) << throttled.error().message;
  EXPECT_EQ(api().requests("create"), 3u);
}

TEST_F(ClientTest, ReadTimeoutIsRetriedForGet) {
  api().put("pods", make_pod("p"));
  api().inject({.verb = "get",
                .path_prefix = pod_path("default", "p"),
                .status = 0,
                .delay = std::chrono::milliseconds(600)});
  auto options = test::fast_client_options();
  options.request_timeout = std::chrono::milliseconds(200);
  auto c = connect(kubeconfig_, options);
  ASSERT_TRUE(c);
  auto r = c->get(pod_path("default", "p"));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(api().requests("get"), 2u);

  options.max_attempts = 1;
  auto once = connect(kubeconfig_, options);
  api().inject({.verb = "get",
                .path_prefix = pod_path("default", "p"),
                .status = 0,
                .delay = std::chrono::milliseconds(600)});
  auto timed_out = once->get(pod_path("default", "p"));
  ASSERT_FALSE(timed_out);
  EXPECT_EQ(timed_out.error().kind, ErrorKind::kTransport);
  EXPECT_THAT(timed_out.error().message, HasSubstr("read timed out"));
}

TEST_F(ClientTest, ConnectionRefused) {
  Config cfg;
  cfg.server = "https://127.0.0.1:1";
  auto c = Client::from_config(cfg, test::fast_client_options());
  ASSERT_TRUE(c);
  auto r = c->get(pod_path("default", "p"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::kTransport);
  EXPECT_THAT(r.error().message, HasSubstr("cannot connect to https://127.0.0.1:1"));
}

TEST_F(ClientTest, BadCredentialsInConfigAreRejectedUpFront) {
  Config cfg;
  cfg.server = api().url();
  cfg.ca_pem = "not a certificate";
  auto no_ca = Client::from_config(cfg);
  ASSERT_FALSE(no_ca);
  EXPECT_THAT(no_ca.error().message, HasSubstr("CA certificates: no PEM certificate found"));
  test::CertAuthority ca;
  const auto a = ca.issue_client("a");
  const auto b = ca.issue_client("b");
  cfg.ca_pem = api().ca_pem();
  cfg.client_cert_pem = a.cert_pem;
  cfg.client_key_pem = b.key_pem;
  auto mismatch = Client::from_config(cfg);
  ASSERT_FALSE(mismatch);
  EXPECT_THAT(mismatch.error().message, HasSubstr("does not match"));
  cfg.server = "ftp://x";
  EXPECT_FALSE(Client::from_config(cfg));
}

TEST_F(ClientTest, SurvivesAnApiServerRestart) {
  api().put("pods", make_pod("p"));
  ASSERT_TRUE(client().get(pod_path("default", "p")));  // leaves a pooled connection
  api().stop();
  auto down = client().get(pod_path("default", "p"));
  ASSERT_FALSE(down);
  EXPECT_EQ(down.error().kind, ErrorKind::kTransport);
  api().start();  // same port, same objects
  auto up = client().get(pod_path("default", "p"));
  ASSERT_TRUE(up) << up.error().message;
  EXPECT_EQ((*up)["metadata"]["name"], "p");
}

class PlainHttpTest : public ApiFixture {
  test::ApiServerOptions server_options() override { return {.tls = false}; }
};

TEST_F(PlainHttpTest, WorksWithoutTls) {
  EXPECT_EQ(api().url().rfind("http://", 0), 0u);
  auto r = client().create(pod_path("default"), make_pod("p"));
  ASSERT_TRUE(r) << r.error().message;
  auto got = client().get(pod_path("default", "p"));
  EXPECT_TRUE(got) << got.error().message;
}

}  // namespace
}  // namespace hami::k8s
