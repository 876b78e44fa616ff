#include "protocol/decision.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "k8s/base64.hpp"

namespace hami::protocol {
namespace {

constexpr size_t kMinKeyBytes = 32;
constexpr std::string_view kVersion = "v1:";

std::string annotation(const k8s::Pod& pod, const char* key) {
  auto it = pod.meta.annotations.find(key);
  return it == pod.meta.annotations.end() ? std::string() : it->second;
}

// Fields joined with a separator none of them can hold (UIDs, names and
// node names are DNS labels or subdomains; the devices text has no NUL), so
// no two decisions share a message.
std::string message(const Decision& d) {
  std::string m = "hami.io/decision v1";
  for (const std::string* f : {&d.uid, &d.ns, &d.name, &d.node, &d.devices}) {
    m += '\0';
    m += *f;
  }
  if (!d.mig.empty()) {
    m += "\0mig\0";
    m += d.mig;
  }
  return m;
}

std::string hmac(const std::string& key, const std::string& msg) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), out, &len);
  return std::string(reinterpret_cast<const char*>(out), len);
}

std::string trim(std::string_view s) {
  const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!s.empty() && blank(s.front()))
    s.remove_prefix(1);
  while (!s.empty() && blank(s.back()))
    s.remove_suffix(1);
  return std::string(s);
}

}  // namespace

std::string mig_scheduler_part(std::string_view annotation) {
  auto allocs = decode_mig_allocations(annotation);
  if (!allocs) return std::string(annotation);
  for (MigAllocation& a : *allocs) {
    a.mig_uuid.clear();
    a.gpu_instance_id.reset();
    a.compute_instance_id.reset();
  }
  return encode_mig_allocations(*allocs);
}

Decision decision_of(const k8s::Pod& pod) {
  auto mig = pod.meta.annotations.find(kMigAllocations);
  return {pod.meta.uid,
          pod.meta.ns,
          pod.meta.name,
          annotation(pod, kAssignedNode),
          annotation(pod, kDevicesAllocated),
          mig == pod.meta.annotations.end() ? std::string() : mig_scheduler_part(mig->second)};
}

Result<DecisionKeys> DecisionKeys::parse(std::string_view text, const std::string& source) {
  DecisionKeys k;
  size_t line = 0;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string key = trim(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++line;
    if (key.empty()) continue;
    if (key.size() < kMinKeyBytes) {
      return Error{source + ": line " + std::to_string(line) + ": a decision key of " +
                   std::to_string(key.size()) + " bytes is too short (at least " +
                   std::to_string(kMinKeyBytes) +
                   "; e.g. head -c 48 /dev/urandom | base64 > the file)"};
    }
    k.keys_.push_back(key);
  }
  if (k.keys_.empty()) {
    return Error{source +
                 ": no decision key (one per line, the first signs; e.g. head -c 48 "
                 "/dev/urandom | base64 > the file)"};
  }
  return k;
}

Result<DecisionKeys> DecisionKeys::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error::from_errno("decision key file " + path + ": cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  return parse(text.str(), "decision key file " + path);
}

std::string DecisionKeys::sign(const Decision& d) const {
  return std::string(kVersion) + k8s::base64_encode(hmac(keys_.front(), message(d)));
}

bool DecisionKeys::verify(const Decision& d, std::string_view signature) const {
  if (signature.substr(0, kVersion.size()) != kVersion) return false;
  const auto mac = k8s::base64_decode(signature.substr(kVersion.size()));
  if (!mac) return false;
  const std::string msg = message(d);
  return std::any_of(keys_.begin(), keys_.end(), [&](const std::string& key) {
    const std::string want = hmac(key, msg);
    return want.size() == mac->size() && CRYPTO_memcmp(want.data(), mac->data(), want.size()) == 0;
  });
}

std::string decision_refusal(const k8s::Pod& pod, const DecisionTrust& trust) {
  const std::string who = "pod " + pod.meta.ns + "/" + pod.meta.name;
  const Decision d = decision_of(pod);
  if (pod.node_name.empty()) {
    return who + " is not bound to a node but carries " + kAssignedNode + "=" + d.node +
           ": only a bound pod holds GPUs";
  }
  if (pod.node_name != d.node) {
    return who + " is bound to node " + pod.node_name + " but carries " + kAssignedNode + "=" +
           d.node + ": the decision is not for the node the pod is on";
  }
  auto sig = pod.meta.annotations.find(kDecisionSignature);
  // Without a key a signature proves nothing here either way: the pod is
  // judged as unsigned.
  if (sig != pod.meta.annotations.end() && trust.keys) {
    if (trust.keys->verify(d, sig->second)) return "";
    return who + ": " + kDecisionSignature +
           " does not match the pod's UID, node and devices (and MIG allocations, if any): the "
           "decision was not made by "
           "the scheduler for this pod, or was changed since";
  }
  const auto& s = trust.unsigned_schedulers;
  if (std::find(s.begin(), s.end(), pod.scheduler_name) != s.end()) return "";
  return who + " carries a GPU decision (" + kAssignedNode + ", " + kDevicesAllocated +
         ") without " + kDecisionSignature + ", and its scheduler \"" + pod.scheduler_name +
         "\" is not trusted to decide unsigned (--trusted-schedulers): only the HAMi "
         "scheduler places GPU pods";
}

std::vector<std::string> parse_name_list(std::string_view text) {
  std::vector<std::string> out;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    std::string name = trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (!name.empty()) out.push_back(std::move(name));
  }
  return out;
}

}  // namespace hami::protocol
