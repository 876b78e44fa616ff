#include "k8s/tls.hpp"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>

namespace hami::k8s::tls {
namespace {

struct BioFree {
  void operator()(BIO* p) const { BIO_free(p); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;

BioPtr memory_bio(const std::string& pem) {
  return BioPtr(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

}  // namespace

std::string last_error() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "no detail from OpenSSL";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

hami::Result<X509Ptr> load_certificate(const std::string& pem) {
  auto bio = memory_bio(pem);
  X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (!cert) return hami::Error{"no PEM certificate found (" + last_error() + ")"};
  return cert;
}

hami::Result<KeyPtr> load_private_key(const std::string& pem) {
  auto bio = memory_bio(pem);
  // An empty passphrase callback: an encrypted key fails instead of prompting.
  auto no_pass = [](char*, int, int, void*) -> int { return 0; };
  KeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, no_pass, nullptr));
  if (!key) return hami::Error{"no unencrypted PEM private key found (" + last_error() + ")"};
  return key;
}

hami::Result<StorePtr> load_ca_store(const std::string& pem) {
  StorePtr store(X509_STORE_new());
  auto bio = memory_bio(pem);
  int count = 0;
  while (X509Ptr cert{PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)}) {
    if (X509_STORE_add_cert(store.get(), cert.get()) != 1) {
      return hami::Error{"cannot add CA certificate (" + last_error() + ")"};
    }
    ++count;
  }
  ERR_clear_error();  // the loop ends on "no start line", which is not a failure
  if (count == 0) return hami::Error{"no PEM certificate found"};
  return store;
}

}  // namespace hami::k8s::tls
