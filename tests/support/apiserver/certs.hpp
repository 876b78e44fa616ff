#pragma once
// A throwaway certificate authority for tests: an EC P-256 CA generated in
// memory with the OpenSSL API, issuing server certificates (with IP and DNS
// subject alternative names) and client certificates (CN = user, O = groups),
// all as PEM text. Failures throw std::runtime_error: a test cannot go on
// without its certificates.
//
//   hami::test::CertAuthority ca;
//   auto server = ca.issue_server({"localhost"}, {"127.0.0.1"});
//   auto user = ca.issue_client("alice", {"system:masters"});
//   write(dir + "/ca.crt", ca.cert_pem());

#include <string>
#include <vector>

#include "k8s/tls.hpp"

namespace hami::test {

struct CertAndKey {
  std::string cert_pem;
  std::string key_pem;
};

class CertAuthority {
 public:
  explicit CertAuthority(const std::string& common_name = "hami-test-ca");

  const std::string& cert_pem() const { return cert_pem_; }
  CertAndKey issue_server(const std::vector<std::string>& dns_names,
                          const std::vector<std::string>& ip_addresses) const;
  CertAndKey issue_client(const std::string& user,
                          const std::vector<std::string>& groups = {}) const;

 private:
  k8s::tls::KeyPtr key_;
  k8s::tls::X509Ptr cert_;
  std::string cert_pem_;
};

}  // namespace hami::test
