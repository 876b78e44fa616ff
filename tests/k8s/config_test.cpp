// Kubeconfig and in-cluster configuration: every supported field, relative
// paths, the errors for malformed files, auto-detection order and token-file
// rotation.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "k8s/base64.hpp"
#include "k8s/config.hpp"
#include "k8s/token_source.hpp"
#include "support/apiserver/certs.hpp"
#include "support/temp_dir.hpp"
#include "test_env.hpp"

namespace hami::k8s {
namespace {

using test::ScopedEnv;
using test::write_text;
using ::testing::HasSubstr;

constexpr const char* kCa = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

// A kubeconfig with two contexts; `cluster` and `user` are spliced into the
// first cluster and user entries (indented four spaces).
std::string kubeconfig(const std::string& cluster, const std::string& user,
                       const std::string& current = "main") {
  return "apiVersion: v1\nkind: Config\ncurrent-context: " + current +
         "\n"
         "contexts:\n"
         "- name: main\n  context:\n    cluster: c1\n    user: u1\n    namespace: gpu\n"
         "- name: other\n  context:\n    cluster: c2\n    user: u2\n"
         "clusters:\n"
         "- name: c1\n  cluster:\n" +
         cluster +
         "- name: c2\n  cluster:\n    server: https://other.example:6443\n"
         "users:\n"
         "- name: u1\n  user:\n" +
         user + "- name: u2\n  user:\n    token: other-token\n";
}

class ConfigTest : public ::testing::Test {
 protected:
  std::string write(const std::string& text, const std::string& name = "config") {
    const std::string p = dir_.file(name);
    write_text(p, text);
    return p;
  }
  test::TempDir dir_;
};

TEST_F(ConfigTest, TokenAndInlineCa) {
  const auto path =
      write(kubeconfig("    server: https://10.0.0.1:6443\n"
                       "    certificate-authority-data: " +
                           base64_encode(kCa) + "\n",
                       "    token: abc.def\n"));
  auto cfg = Config::from_kubeconfig(path);
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_EQ(cfg->server, "https://10.0.0.1:6443");
  EXPECT_EQ(cfg->ca_pem, kCa);
  EXPECT_EQ(cfg->token, "abc.def");
  EXPECT_TRUE(cfg->token_file.empty());
  EXPECT_EQ(cfg->default_namespace, "gpu");
  EXPECT_FALSE(cfg->insecure_skip_tls_verify);
  EXPECT_THAT(cfg->source, HasSubstr(path));
  EXPECT_THAT(cfg->source, HasSubstr("main"));
}

TEST_F(ConfigTest, RelativePathsResolveAgainstTheKubeconfigDirectory) {
  std::filesystem::create_directories(dir_.file("sub/certs"));
  write_text(dir_.file("sub/certs/ca.crt"), kCa);
  write_text(dir_.file("sub/token"), "from-file\n");
  test::CertAuthority ca;
  const auto client = ca.issue_client("alice");
  write_text(dir_.file("sub/certs/me.crt"), client.cert_pem);
  write_text(dir_.file("sub/certs/me.key"), client.key_pem);
  const auto path = write(kubeconfig("    server: https://k:443\n"
                                     "    certificate-authority: certs/ca.crt\n",
                                     "    tokenFile: token\n"
                                     "    client-certificate: certs/me.crt\n"
                                     "    client-key: certs/me.key\n"),
                          "sub/config");
  auto cfg = Config::from_kubeconfig(path);
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_EQ(cfg->ca_pem, kCa);
  EXPECT_EQ(cfg->token_file, dir_.file("sub/token"));
  EXPECT_EQ(cfg->client_cert_pem, client.cert_pem);
  EXPECT_EQ(cfg->client_key_pem, client.key_pem);
}

TEST_F(ConfigTest, ClientCertificateDataAndTlsOptions) {
  test::CertAuthority ca;
  const auto client = ca.issue_client("bob");
  const auto path =
      write(kubeconfig("    server: https://k:443\n    insecure-skip-tls-verify: true\n"
                       "    tls-server-name: kubernetes.default.svc\n",
                       "    client-certificate-data: " + base64_encode(client.cert_pem) +
                           "\n    client-key-data: " + base64_encode(client.key_pem) + "\n"));
  auto cfg = Config::from_kubeconfig(path);
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_TRUE(cfg->insecure_skip_tls_verify);
  EXPECT_EQ(cfg->tls_server_name, "kubernetes.default.svc");
  EXPECT_EQ(cfg->client_cert_pem, client.cert_pem);
  EXPECT_EQ(cfg->client_key_pem, client.key_pem);
  EXPECT_TRUE(cfg->ca_pem.empty());
}

TEST_F(ConfigTest, ExplicitContextWins) {
  const auto path = write(kubeconfig("    server: https://k:443\n", "    token: t\n"));
  auto cfg = Config::from_kubeconfig(path, "other");
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_EQ(cfg->server, "https://other.example:6443");
  EXPECT_EQ(cfg->token, "other-token");
  EXPECT_EQ(cfg->default_namespace, "default");

  auto missing = Config::from_kubeconfig(path, "nope");
  ASSERT_FALSE(missing);
  EXPECT_THAT(missing.error().message, HasSubstr("contexts: no entry named \"nope\""));
}

struct BadCase {
  const char* name;
  std::string text;
  const char* expect;
};

class BadKubeconfig : public ConfigTest, public ::testing::WithParamInterface<BadCase> {};

TEST_P(BadKubeconfig, ErrorNamesFileAndField) {
  const auto path = write(GetParam().text);
  auto cfg = Config::from_kubeconfig(path);
  ASSERT_FALSE(cfg) << GetParam().name;
  EXPECT_THAT(cfg.error().message, HasSubstr("kubeconfig " + path));
  EXPECT_THAT(cfg.error().message, HasSubstr(GetParam().expect));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadKubeconfig,
    ::testing::Values(
        BadCase{"no current context", "apiVersion: v1\nclusters: []\ncontexts: []\nusers: []\n",
                "current-context"},
        BadCase{"missing server", kubeconfig("    insecure-skip-tls-verify: true\n", ""),
                "clusters[0].cluster.server: missing"},
        BadCase{"server not a URL", kubeconfig("    server: 10.0.0.1:6443\n", ""),
                "is not an http(s):// URL"},
        BadCase{"server is a list", kubeconfig("    server: [a, b]\n", ""),
                "clusters[0].cluster.server: expected a string"},
        BadCase{"bad base64",
                kubeconfig("    server: https://k\n    certificate-authority-data: '%%%'\n", ""),
                "certificate-authority-data: not valid base64"},
        BadCase{"missing CA file",
                kubeconfig("    server: https://k\n    certificate-authority: nowhere.crt\n", ""),
                "nowhere.crt"},
        BadCase{"bad boolean",
                kubeconfig("    server: https://k\n    insecure-skip-tls-verify: maybe\n", ""),
                "insecure-skip-tls-verify: expected true or false"},
        BadCase{"exec plugin",
                kubeconfig("    server: https://k\n", "    exec:\n      command: aws\n"),
                "users[0].user.exec: not supported"},
        BadCase{"cert without key",
                kubeconfig("    server: https://k\n",
                           "    client-certificate-data: " + base64_encode(kCa) + "\n"),
                "client-certificate and client-key must be given together"},
        BadCase{"missing token file",
                kubeconfig("    server: https://k\n", "    tokenFile: /nonexistent/token\n"),
                "tokenFile: /nonexistent/token"},
        BadCase{"clusters not a list",
                "current-context: main\ncontexts:\n- name: main\n  context:\n    cluster: c\n"
                "clusters: {c: 1}\n",
                "clusters: expected a list"},
        BadCase{"malformed YAML", "current-context: [unclosed\nclusters:\n",
                "not valid YAML: line"},
        BadCase{"not a map", "- just\n- a list\n", "expected a YAML map"}),
    [](const ::testing::TestParamInfo<BadCase>& param_info) {
      std::string n = param_info.param.name;
      for (char& c : n) {
        if (!isalnum(static_cast<unsigned char>(c))) c = '_';
      }
      return n;
    });

TEST_F(ConfigTest, MissingFileIsAnError) {
  auto cfg = Config::from_kubeconfig(dir_.file("absent"));
  ASSERT_FALSE(cfg);
  EXPECT_THAT(cfg.error().message, HasSubstr("absent"));
  EXPECT_EQ(cfg.error().sys_errno, ENOENT);
}

class InClusterTest : public ConfigTest {
 protected:
  void SetUp() override {
    sa_ = dir_.file("sa");
    std::filesystem::create_directories(sa_);
    write_text(sa_ + "/token", "sa-token\n");
    write_text(sa_ + "/ca.crt", kCa);
    write_text(sa_ + "/namespace", "hami-system\n");
  }
  std::string sa_;
};

TEST_F(InClusterTest, ReadsServiceAccountAndEnvironment) {
  ScopedEnv host("KUBERNETES_SERVICE_HOST", "10.96.0.1");
  ScopedEnv port("KUBERNETES_SERVICE_PORT", "443");
  auto cfg = Config::in_cluster(sa_);
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_EQ(cfg->server, "https://10.96.0.1:443");
  EXPECT_EQ(cfg->token_file, sa_ + "/token");
  EXPECT_EQ(cfg->ca_pem, kCa);
  EXPECT_EQ(cfg->default_namespace, "hami-system");
}

TEST_F(InClusterTest, Ipv6HostIsBracketed) {
  ScopedEnv host("KUBERNETES_SERVICE_HOST", "fd00::1");
  ScopedEnv port("KUBERNETES_SERVICE_PORT", "6443");
  auto cfg = Config::in_cluster(sa_);
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_EQ(cfg->server, "https://[fd00::1]:6443");
}

TEST_F(InClusterTest, Errors) {
  {
    ScopedEnv host("KUBERNETES_SERVICE_HOST", nullptr);
    auto cfg = Config::in_cluster(sa_);
    ASSERT_FALSE(cfg);
    EXPECT_THAT(cfg.error().message, HasSubstr("KUBERNETES_SERVICE_HOST"));
  }
  ScopedEnv host("KUBERNETES_SERVICE_HOST", "10.96.0.1");
  ScopedEnv port("KUBERNETES_SERVICE_PORT", "443");
  ::unlink((sa_ + "/ca.crt").c_str());
  auto no_ca = Config::in_cluster(sa_);
  ASSERT_FALSE(no_ca);
  EXPECT_THAT(no_ca.error().message, HasSubstr(sa_ + "/ca.crt"));
  ::unlink((sa_ + "/token").c_str());
  auto no_token = Config::in_cluster(sa_);
  ASSERT_FALSE(no_token);
  EXPECT_THAT(no_token.error().message, HasSubstr(sa_ + "/token"));
}

TEST_F(InClusterTest, AutoDetectOrder) {
  const auto explicit_path = write(kubeconfig("    server: https://explicit\n", ""), "explicit");
  const auto env_path = write(kubeconfig("    server: https://from-env\n", ""), "env");
  std::filesystem::create_directories(dir_.file("home/.kube"));
  write_text(dir_.file("home/.kube/config"), kubeconfig("    server: https://home\n", ""));
  ScopedEnv home("HOME", dir_.file("home").c_str());

  // 1. An explicit path wins over everything.
  const std::string list = dir_.file("missing") + ":" + env_path;
  ScopedEnv kc("KUBECONFIG", list.c_str());
  ScopedEnv host("KUBERNETES_SERVICE_HOST", "10.96.0.1");
  ScopedEnv port("KUBERNETES_SERVICE_PORT", "443");
  auto cfg = Config::auto_detect(explicit_path, sa_);
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_EQ(cfg->server, "https://explicit");
  // 2. Then the first existing file in $KUBECONFIG.
  cfg = Config::auto_detect(std::nullopt, sa_);
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_EQ(cfg->server, "https://from-env");
  {
    // 3. Then in-cluster.
    ScopedEnv no_kc("KUBECONFIG", nullptr);
    cfg = Config::auto_detect(std::nullopt, sa_);
    ASSERT_TRUE(cfg) << cfg.error().message;
    EXPECT_EQ(cfg->server, "https://10.96.0.1:443");
    // 4. Then ~/.kube/config.
    ScopedEnv no_host("KUBERNETES_SERVICE_HOST", nullptr);
    cfg = Config::auto_detect(std::nullopt, sa_);
    ASSERT_TRUE(cfg) << cfg.error().message;
    EXPECT_EQ(cfg->server, "https://home");
    // Nothing: the error lists what was tried.
    ScopedEnv no_home("HOME", dir_.file("empty-home").c_str());
    cfg = Config::auto_detect(std::nullopt, sa_);
    ASSERT_FALSE(cfg);
    EXPECT_THAT(cfg.error().message, HasSubstr("$KUBECONFIG (unset)"));
    EXPECT_THAT(cfg.error().message, HasSubstr("in-cluster (KUBERNETES_SERVICE_HOST unset)"));
    EXPECT_THAT(cfg.error().message, HasSubstr(dir_.file("empty-home/.kube/config")));
  }
  // An explicit path that fails does not fall back.
  cfg = Config::auto_detect(dir_.file("missing"), sa_);
  ASSERT_FALSE(cfg);
  EXPECT_THAT(cfg.error().message, HasSubstr(dir_.file("missing")));
}

TEST_F(ConfigTest, TokenFileIsReReadWhenItChanges) {
  const std::string path = dir_.file("token");
  auto missing = TokenSource::from_file(path);
  auto none = missing->token();
  ASSERT_FALSE(none);
  EXPECT_THAT(none.error().message, HasSubstr(path));

  write_text(path, "first\n");
  auto source = TokenSource::from_file(path);
  ASSERT_EQ(*source->token(), "first");
  // The kubelet swaps the file atomically (a new inode): the new token is seen.
  write_text(dir_.file("token.new"), "second\n");
  ASSERT_EQ(::rename(dir_.file("token.new").c_str(), path.c_str()), 0);
  EXPECT_EQ(*source->token(), "second");
  // Rewritten in place with the same size: the mtime changes.
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  write_text(path, "third!\n");
  timespec times[2] = {st.st_atim, st.st_mtim};
  times[1].tv_sec += 2;
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
  EXPECT_EQ(*source->token(), "third!");
  // Gone or empty mid-rotation: the last good token is kept.
  ::unlink(path.c_str());
  EXPECT_EQ(*source->token(), "third!");
  write_text(path, "");
  EXPECT_EQ(*source->token(), "third!");
  EXPECT_EQ(*TokenSource::fixed("static")->token(), "static");
}

}  // namespace
}  // namespace hami::k8s
