#pragma once
// Where the API server is and how to authenticate to it: from a kubeconfig file
// or from the service account a pod runs as. Certificates are kept as PEM text
// (files are read here, *-data fields decoded here), so a Config is a plain
// value; a token file is kept as a path because the kubelet rotates it.
//
//   auto cfg = hami::k8s::Config::auto_detect(flag_kubeconfig);  // optional path
//   if (!cfg) { fprintf(stderr, "%s\n", cfg.error().message.c_str()); return 2; }
//   auto client = hami::k8s::Client::create(*cfg);
//
// Supported kubeconfig fields: current-context; contexts[].context{cluster,
// user, namespace}; clusters[].cluster{server, certificate-authority(-data),
// insecure-skip-tls-verify, tls-server-name}; users[].user{token, tokenFile,
// client-certificate(-data), client-key(-data)}. Relative file paths are
// resolved against the kubeconfig's directory. exec and auth-provider plugins
// and basic auth are rejected with an error saying so.

#include <optional>
#include <string>

#include "common/result.hpp"

namespace hami::k8s {

inline constexpr const char* kServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount";

struct Config {
  std::string server;  // "https://10.0.0.1:6443"; "http://..." talks plain HTTP
  std::string ca_pem;  // trusted CA certificates; empty: the system's
  bool insecure_skip_tls_verify = false;
  std::string tls_server_name;  // verify the server certificate against this name
  std::string client_cert_pem;
  std::string client_key_pem;
  std::string token;       // a bearer token, or
  std::string token_file;  // a file holding one (re-read when it changes)
  std::string default_namespace = "default";
  std::string source;  // where this came from, for logs: "kubeconfig /x (context c)"

  // `context` empty: the file's current-context.
  static hami::Result<Config> from_kubeconfig(const std::string& path,
                                              const std::string& context = {});
  // KUBERNETES_SERVICE_HOST/PORT and the service account's token, ca.crt and
  // namespace files under `sa_dir`.
  static hami::Result<Config> in_cluster(const std::string& sa_dir = kServiceAccountDir);
  // `path` if given (no fallback when it fails), else the first existing file in
  // $KUBECONFIG (colon-separated), else in-cluster when KUBERNETES_SERVICE_HOST is
  // set, else ~/.kube/config. The error lists everything that was tried.
  static hami::Result<Config> auto_detect(const std::optional<std::string>& path = std::nullopt,
                                          const std::string& sa_dir = kServiceAccountDir);
};

}  // namespace hami::k8s
