// SPDX-License-Identifier: Apache-2.0
#include "tls_certs.hpp"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>

namespace polybus::test {
namespace {

using Key = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;
using Cert = std::unique_ptr<X509, decltype(&X509_free)>;

Key make_key() {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  if (!key) throw std::runtime_error("EC key generation failed");
  return Key(key, EVP_PKEY_free);
}

void add_extension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (!ext) throw std::runtime_error("bad X509 extension");
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

// issuer/issuer_key null: self-signed.
Cert make_cert(EVP_PKEY* key, const char* common_name, X509* issuer, EVP_PKEY* issuer_key,
               bool is_ca, const char* alt_names) {
  static long serial = 1;
  Cert cert(X509_new(), X509_free);
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), serial++);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 3600L * 24);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(common_name), -1, -1, 0);
  X509* signer = issuer ? issuer : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  if (is_ca) {
    add_extension(cert.get(), signer, NID_basic_constraints, "critical,CA:TRUE");
    add_extension(cert.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign");
  } else {
    add_extension(cert.get(), signer, NID_basic_constraints, "critical,CA:FALSE");
    if (alt_names) add_extension(cert.get(), signer, NID_subject_alt_name, alt_names);
  }
  if (!X509_sign(cert.get(), issuer_key ? issuer_key : key, EVP_sha256()))
    throw std::runtime_error("certificate signing failed");
  return cert;
}

void write_pem(const std::string& path, X509* cert, EVP_PKEY* key) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) throw std::runtime_error("cannot write " + path);
  if (cert) PEM_write_X509(f, cert);
  if (key) PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
  std::fclose(f);
}

}  // namespace

TestCertificates::TestCertificates() {
  char pattern[] = "/tmp/polybus-tls-XXXXXX";
  if (!mkdtemp(pattern)) throw std::runtime_error("mkdtemp failed");
  dir = pattern;
  ca_file = dir + "/ca.pem";
  other_ca_file = dir + "/other-ca.pem";
  server_cert_file = dir + "/server.pem";
  server_key_file = dir + "/server-key.pem";
  client_cert_file = dir + "/client.pem";
  client_key_file = dir + "/client-key.pem";

  auto ca_key = make_key();
  auto ca = make_cert(ca_key.get(), "polybus test CA", nullptr, nullptr, true, nullptr);
  auto server_key = make_key();
  auto server = make_cert(server_key.get(), "localhost", ca.get(), ca_key.get(), false,
                          "DNS:localhost,IP:127.0.0.1");
  auto client_key = make_key();
  auto client =
      make_cert(client_key.get(), "polybus test client", ca.get(), ca_key.get(), false, nullptr);
  auto other_key = make_key();
  auto other = make_cert(other_key.get(), "unrelated CA", nullptr, nullptr, true, nullptr);

  write_pem(ca_file, ca.get(), nullptr);
  write_pem(other_ca_file, other.get(), nullptr);
  write_pem(server_cert_file, server.get(), nullptr);
  write_pem(server_key_file, nullptr, server_key.get());
  write_pem(client_cert_file, client.get(), nullptr);
  write_pem(client_key_file, nullptr, client_key.get());
}

TestCertificates::~TestCertificates() {
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

}  // namespace polybus::test
