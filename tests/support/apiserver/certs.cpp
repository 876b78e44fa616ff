#include "support/apiserver/certs.hpp"

#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <atomic>
#include <stdexcept>

namespace hami::test {
namespace {

using k8s::tls::KeyPtr;
using k8s::tls::X509Ptr;

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error("test CA: " + what + ": " + k8s::tls::last_error());
}

KeyPtr new_key() {
  KeyPtr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  if (!key) fail("EC key generation");
  return key;
}

void add_ext(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (!ext) fail("extension " + value);
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

void add_name(X509_NAME* name, const char* field, const std::string& value) {
  if (X509_NAME_add_entry_by_txt(name, field, MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(value.c_str()), -1, -1,
                                 0) != 1) {
    fail(std::string("subject ") + field);
  }
}

// An unsigned certificate for `key`, valid from an hour ago (clock skew between
// test processes is not our subject) for a day.
X509Ptr new_cert(EVP_PKEY* key) {
  static std::atomic<long> serial{1000};
  X509Ptr cert(X509_new());
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), ++serial);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 24 * 3600);
  X509_set_pubkey(cert.get(), key);
  return cert;
}

// Signs `cert` with issuer_key; self-signed when issuer is null.
void sign(X509* cert, X509* issuer, EVP_PKEY* issuer_key) {
  X509_set_issuer_name(cert, X509_get_subject_name(issuer ? issuer : cert));
  if (X509_sign(cert, issuer_key, EVP_sha256()) == 0) fail("signing");
}

std::string to_pem(X509* cert) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), BIO_free);
  if (PEM_write_bio_X509(bio.get(), cert) != 1) fail("PEM encoding");
  char* data = nullptr;
  const long n = BIO_ctrl(bio.get(), BIO_CTRL_INFO, 0, &data);
  return std::string(data, static_cast<size_t>(n));
}

std::string to_pem(EVP_PKEY* key) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), BIO_free);
  if (PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    fail("PEM encoding");
  }
  char* data = nullptr;
  const long n = BIO_ctrl(bio.get(), BIO_CTRL_INFO, 0, &data);
  return std::string(data, static_cast<size_t>(n));
}

}  // namespace

CertAuthority::CertAuthority(const std::string& common_name) : key_(new_key()) {
  cert_ = new_cert(key_.get());
  add_name(X509_get_subject_name(cert_.get()), "CN", common_name);
  add_ext(cert_.get(), cert_.get(), NID_basic_constraints, "critical,CA:TRUE");
  add_ext(cert_.get(), cert_.get(), NID_key_usage, "critical,keyCertSign,cRLSign");
  add_ext(cert_.get(), cert_.get(), NID_subject_key_identifier, "hash");
  sign(cert_.get(), nullptr, key_.get());
  cert_pem_ = to_pem(cert_.get());
}

CertAndKey CertAuthority::issue_server(const std::vector<std::string>& dns_names,
                                       const std::vector<std::string>& ip_addresses) const {
  KeyPtr key = new_key();
  X509Ptr cert = new_cert(key.get());
  add_name(X509_get_subject_name(cert.get()), "CN",
           dns_names.empty() ? std::string("apiserver") : dns_names.front());
  add_ext(cert.get(), cert_.get(), NID_basic_constraints, "critical,CA:FALSE");
  add_ext(cert.get(), cert_.get(), NID_key_usage, "critical,digitalSignature,keyEncipherment");
  add_ext(cert.get(), cert_.get(), NID_ext_key_usage, "serverAuth");
  add_ext(cert.get(), cert_.get(), NID_authority_key_identifier, "keyid:always");
  std::string san;
  for (const auto& d : dns_names)
    san += (san.empty() ? "DNS:" : ",DNS:") + d;
  for (const auto& ip : ip_addresses)
    san += (san.empty() ? "IP:" : ",IP:") + ip;
  if (!san.empty()) add_ext(cert.get(), cert_.get(), NID_subject_alt_name, san);
  sign(cert.get(), cert_.get(), key_.get());
  return {to_pem(cert.get()), to_pem(key.get())};
}

CertAndKey CertAuthority::issue_client(const std::string& user,
                                       const std::vector<std::string>& groups) const {
  KeyPtr key = new_key();
  X509Ptr cert = new_cert(key.get());
  X509_NAME* name = X509_get_subject_name(cert.get());
  for (const auto& g : groups)
    add_name(name, "O", g);
  add_name(name, "CN", user);
  add_ext(cert.get(), cert_.get(), NID_basic_constraints, "critical,CA:FALSE");
  add_ext(cert.get(), cert_.get(), NID_key_usage, "critical,digitalSignature");
  add_ext(cert.get(), cert_.get(), NID_ext_key_usage, "clientAuth");
  add_ext(cert.get(), cert_.get(), NID_authority_key_identifier, "keyid:always");
  sign(cert.get(), cert_.get(), key_.get());
  return {to_pem(cert.get()), to_pem(key.get())};
}

}  // namespace hami::test
