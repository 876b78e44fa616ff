#include "k8s/config.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "common/small_file.hpp"
#include "k8s/base64.hpp"

namespace hami::k8s {
namespace {

constexpr size_t kMaxFile = 4 << 20;

// Typed access to the kubeconfig's nodes; every error names the file and the
// field ("kubeconfig /k: clusters[0].cluster.server: missing").
class Kubeconfig {
 public:
  Kubeconfig(std::string path, YAML::Node root) : path_(std::move(path)), root_(std::move(root)) {}

  hami::Error error(const std::string& field, const std::string& what) const {
    return hami::Error{"kubeconfig " + path_ + ": " + field + ": " + what};
  }

  // A string field; nullopt when absent or null.
  hami::Result<std::optional<std::string>> str(const YAML::Node& parent, const char* key,
                                               const std::string& field) const {
    const YAML::Node n = parent[key];
    if (!n.IsDefined() || n.IsNull()) return std::optional<std::string>{};
    if (!n.IsScalar()) return error(field, "expected a string");
    return std::optional<std::string>{n.Scalar()};
  }

  hami::Result<bool> boolean(const YAML::Node& parent, const char* key,
                             const std::string& field) const {
    const YAML::Node n = parent[key];
    if (!n.IsDefined() || n.IsNull()) return false;
    bool v = false;
    if (!n.IsScalar() || !YAML::convert<bool>::decode(n, v)) {
      return error(field, "expected true or false");
    }
    return v;
  }

  // The `inner` map of the entry named `name` in the list `list` ("clusters",
  // "cluster"), and the field path of that map for errors.
  // `allow_empty`: an entry whose map is absent or null reads as an empty map (a
  // user with no credentials).
  hami::Result<std::pair<YAML::Node, std::string>> named(const char* list, const char* inner,
                                                         const std::string& name,
                                                         bool allow_empty = false) const {
    const YAML::Node seq = root_[list];
    if (!seq.IsDefined() || seq.IsNull()) return error(list, "missing");
    if (!seq.IsSequence()) return error(list, "expected a list");
    for (size_t i = 0; i < seq.size(); ++i) {
      const std::string at = std::string(list) + "[" + std::to_string(i) + "]";
      const YAML::Node entry = seq[i];
      if (!entry.IsMap()) return error(at, "expected a map");
      auto entry_name = str(entry, "name", at + ".name");
      if (!entry_name) return entry_name.error();
      if (!entry_name->has_value() || **entry_name != name) continue;
      const YAML::Node body = entry[inner];
      const std::string field = at + "." + inner;
      if (!body.IsDefined() || body.IsNull()) {
        if (allow_empty) return std::make_pair(YAML::Node(YAML::NodeType::Map), field);
        return error(field, "missing");
      }
      if (!body.IsMap()) return error(field, "expected a map");
      return std::make_pair(body, field);
    }
    return error(list, "no entry named \"" + name + "\"");
  }

  // A file path field, resolved against the kubeconfig's directory.
  std::string resolve(const std::string& file) const {
    if (file.empty() || file[0] == '/') return file;
    return (std::filesystem::path(path_).parent_path() / file).lexically_normal().string();
  }

  // PEM text from either `<key>` (a file) or `<key>-data` (base64); empty when neither.
  hami::Result<std::string> pem(const YAML::Node& parent, const std::string& key,
                                const std::string& field) const {
    const std::string data_key = key + "-data";
    auto data = str(parent, data_key.c_str(), field + "." + data_key);
    if (!data) return data.error();
    if (data->has_value()) {
      auto decoded = base64_decode(**data);
      if (!decoded) return error(field + "." + data_key, "not valid base64");
      if (decoded->empty()) return error(field + "." + data_key, "empty");
      return std::move(*decoded);
    }
    auto file = str(parent, key.c_str(), field + "." + key);
    if (!file) return file.error();
    if (!file->has_value() || (*file)->empty()) return std::string();
    auto text = read_small_file(resolve(**file), kMaxFile);
    if (!text) return error(field + "." + key, text.error().message);
    return std::move(*text);
  }

  const std::string& path() const { return path_; }
  const YAML::Node& root() const { return root_; }

 private:
  std::string path_;
  YAML::Node root_;
};

#define HAMI_ASSIGN(var, expr)          \
  auto var##_r = (expr);                \
  if (!var##_r) return var##_r.error(); \
  auto var = std::move(*var##_r)

hami::Result<Config> load(const Kubeconfig& kc, const std::string& wanted_context) {
  Config cfg;
  std::string context = wanted_context;
  if (context.empty()) {
    HAMI_ASSIGN(current, kc.str(kc.root(), "current-context", "current-context"));
    if (!current || current->empty()) {
      return kc.error("current-context", "not set (and no context was given)");
    }
    context = *current;
  }
  HAMI_ASSIGN(ctx, kc.named("contexts", "context", context));
  const auto& [ctx_node, ctx_field] = ctx;
  HAMI_ASSIGN(cluster_name, kc.str(ctx_node, "cluster", ctx_field + ".cluster"));
  if (!cluster_name || cluster_name->empty()) return kc.error(ctx_field + ".cluster", "missing");
  HAMI_ASSIGN(user_name, kc.str(ctx_node, "user", ctx_field + ".user"));
  HAMI_ASSIGN(ns, kc.str(ctx_node, "namespace", ctx_field + ".namespace"));
  if (ns && !ns->empty()) cfg.default_namespace = *ns;

  HAMI_ASSIGN(cl, kc.named("clusters", "cluster", *cluster_name));
  const auto& [cl_node, cl_field] = cl;
  HAMI_ASSIGN(server, kc.str(cl_node, "server", cl_field + ".server"));
  if (!server || server->empty()) return kc.error(cl_field + ".server", "missing");
  if (server->rfind("https://", 0) != 0 && server->rfind("http://", 0) != 0) {
    return kc.error(cl_field + ".server", "\"" + *server + "\" is not an http(s):// URL");
  }
  cfg.server = *server;
  HAMI_ASSIGN(ca, kc.pem(cl_node, "certificate-authority", cl_field));
  cfg.ca_pem = std::move(ca);
  HAMI_ASSIGN(insecure, kc.boolean(cl_node, "insecure-skip-tls-verify",
                                   cl_field + ".insecure-skip-tls-verify"));
  cfg.insecure_skip_tls_verify = insecure;
  HAMI_ASSIGN(sni, kc.str(cl_node, "tls-server-name", cl_field + ".tls-server-name"));
  if (sni) cfg.tls_server_name = *sni;

  if (user_name && !user_name->empty()) {
    HAMI_ASSIGN(us, kc.named("users", "user", *user_name, true));
    const auto& [u_node, u_field] = us;
    for (const char* unsupported : {"exec", "auth-provider", "username", "password"}) {
      if (u_node[unsupported].IsDefined() && !u_node[unsupported].IsNull()) {
        return kc.error(u_field + "." + unsupported,
                        "not supported; use token, tokenFile or a client certificate");
      }
    }
    HAMI_ASSIGN(token, kc.str(u_node, "token", u_field + ".token"));
    if (token) cfg.token = *token;
    HAMI_ASSIGN(token_file, kc.str(u_node, "tokenFile", u_field + ".tokenFile"));
    if (token_file && !token_file->empty()) {
      cfg.token_file = kc.resolve(*token_file);
      if (::access(cfg.token_file.c_str(), R_OK) != 0) {
        return kc.error(u_field + ".tokenFile",
                        hami::Error::from_errno(cfg.token_file + ": cannot read").message);
      }
    }
    HAMI_ASSIGN(cert, kc.pem(u_node, "client-certificate", u_field));
    HAMI_ASSIGN(key, kc.pem(u_node, "client-key", u_field));
    if (cert.empty() != key.empty()) {
      return kc.error(u_field, "client-certificate and client-key must be given together");
    }
    cfg.client_cert_pem = std::move(cert);
    cfg.client_key_pem = std::move(key);
  }
  cfg.source = "kubeconfig " + kc.path() + " (context " + context + ")";
  return cfg;
}

#undef HAMI_ASSIGN

}  // namespace

hami::Result<Config> Config::from_kubeconfig(const std::string& path, const std::string& context) {
  auto text = read_small_file(path, kMaxFile);
  if (!text) return hami::Error{"kubeconfig " + text.error().message, text.error().sys_errno};
  YAML::Node root;
  try {
    root = YAML::Load(*text);
  } catch (const YAML::Exception& e) {
    return hami::Error{"kubeconfig " + path + ": not valid YAML: line " +
                       std::to_string(e.mark.line + 1) + ", column " +
                       std::to_string(e.mark.column + 1) + ": " + e.msg};
  }
  if (!root.IsMap()) return hami::Error{"kubeconfig " + path + ": expected a YAML map"};
  try {
    return load(Kubeconfig(path, root), context);
  } catch (const YAML::Exception& e) {
    // yaml-cpp throws on some shapes our checks do not anticipate (e.g. a
    // sequence indexed as a map); report rather than escape the library.
    return hami::Error{"kubeconfig " + path + ": " + e.what()};
  }
}

hami::Result<Config> Config::in_cluster(const std::string& sa_dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (!host || !*host || !port || !*port) {
    return hami::Error{
        "in-cluster config: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set "
        "(not running in a pod?)"};
  }
  Config cfg;
  const std::string h = host;
  cfg.server = "https://" + (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" + port;
  cfg.token_file = sa_dir + "/token";
  if (::access(cfg.token_file.c_str(), R_OK) != 0) {
    return hami::Error{"in-cluster config: " +
                       hami::Error::from_errno("service-account token " + cfg.token_file).message};
  }
  auto ca = read_small_file(sa_dir + "/ca.crt", kMaxFile);
  if (!ca) return hami::Error{"in-cluster config: CA " + ca.error().message};
  cfg.ca_pem = std::move(*ca);
  if (auto ns = read_small_file(sa_dir + "/namespace", 4096); ns) {
    const auto end = ns->find_last_not_of(" \t\r\n");
    if (end != std::string::npos) cfg.default_namespace = ns->substr(0, end + 1);
  }
  cfg.source = "in-cluster (" + sa_dir + ")";
  return cfg;
}

hami::Result<Config> Config::auto_detect(const std::optional<std::string>& path,
                                         const std::string& sa_dir) {
  if (path) return from_kubeconfig(*path);
  std::vector<std::string> tried;
  const char* env = std::getenv("KUBECONFIG");
  if (env && *env) {
    std::string list = env;
    size_t start = 0;
    while (start <= list.size()) {
      const size_t end = std::min(list.find(':', start), list.size());
      const std::string file = list.substr(start, end - start);
      start = end + 1;
      if (file.empty()) continue;
      if (::access(file.c_str(), F_OK) == 0) return from_kubeconfig(file);
      tried.push_back("$KUBECONFIG " + file + " (" + std::strerror(errno) + ")");
    }
  } else {
    tried.emplace_back("$KUBECONFIG (unset)");
  }
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  if (host && *host) return in_cluster(sa_dir);
  tried.emplace_back("in-cluster (KUBERNETES_SERVICE_HOST unset)");
  const char* home = std::getenv("HOME");
  if (home && *home) {
    const std::string file = std::string(home) + "/.kube/config";
    if (::access(file.c_str(), F_OK) == 0) return from_kubeconfig(file);
    tried.push_back(file + " (" + std::strerror(errno) + ")");
  } else {
    tried.emplace_back("~/.kube/config ($HOME unset)");
  }
  std::string msg = "no Kubernetes configuration found; tried ";
  for (size_t i = 0; i < tried.size(); ++i)
    msg += (i ? ", " : "") + tried[i];
  return hami::Error{msg};
}

}  // namespace hami::k8s
