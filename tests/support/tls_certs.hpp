// SPDX-License-Identifier: Apache-2.0
// A throw-away certificate authority for TLS tests: a CA, a server certificate for localhost and
// 127.0.0.1 signed by it, and a client certificate, written as PEM files to a temporary
// directory that is removed with the object.
#pragma once

#include <string>

namespace polybus::test {

struct TestCertificates {
  TestCertificates();
  ~TestCertificates();
  TestCertificates(const TestCertificates&) = delete;
  TestCertificates& operator=(const TestCertificates&) = delete;

  std::string dir;
  std::string ca_file;
  std::string server_cert_file, server_key_file;
  std::string client_cert_file, client_key_file;
  std::string other_ca_file;  // a second, unrelated CA: verification against it must fail
};

}  // namespace polybus::test
