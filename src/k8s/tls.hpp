#pragma once
// OpenSSL objects made from the PEM text a Config holds, owned by unique_ptrs.
// The client builds one CA store per connection because cpp-httplib's
// SSLClient takes ownership of the store it is given.
//
//   auto cert = hami::k8s::tls::load_certificate(cfg.client_cert_pem);  // Result<X509Ptr>
//   auto store = hami::k8s::tls::load_ca_store(cfg.ca_pem);            // Result<StorePtr>

#include <openssl/evp.h>
#include <openssl/x509.h>

#include <memory>
#include <string>

#include "common/result.hpp"

namespace hami::k8s::tls {

struct X509Free {
  void operator()(X509* p) const { X509_free(p); }
};
struct KeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct StoreFree {
  void operator()(X509_STORE* p) const { X509_STORE_free(p); }
};
using X509Ptr = std::unique_ptr<X509, X509Free>;
using KeyPtr = std::unique_ptr<EVP_PKEY, KeyFree>;
using StorePtr = std::unique_ptr<X509_STORE, StoreFree>;

// The first certificate in `pem`.
hami::Result<X509Ptr> load_certificate(const std::string& pem);
// A private key in any PEM form OpenSSL reads (PKCS#8, RSA, EC), unencrypted.
hami::Result<KeyPtr> load_private_key(const std::string& pem);
// Every certificate in `pem` as trust anchors; an error when there is none.
hami::Result<StorePtr> load_ca_store(const std::string& pem);
// The last OpenSSL error as text, and the queue cleared.
std::string last_error();

}  // namespace hami::k8s::tls
