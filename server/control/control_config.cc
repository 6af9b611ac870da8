#include "server/control/control_config.h"

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/common/read_file.h"

namespace retryd::control {
namespace {

constexpr size_t kMaxTokenBytes = 4096;

absl::Status Invalid(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("control.", field, ": ", what));
}

// A token is one short line: a token file larger than this is the wrong
// file. Generous next to kMaxTokenBytes, so CheckToken reports a long token.
constexpr size_t kMaxTokenFileBytes = 64 << 10;
// A certificate chain or CA bundle: Debian's whole CA bundle is ~200 KiB.
constexpr size_t kMaxPemFileBytes = 1 << 20;

// The file at `path`, named by config field `field`, read whole.
absl::StatusOr<std::string> ReadFieldFile(const std::string& field, const std::string& path,
                                          size_t max_bytes) {
  absl::StatusOr<std::string> contents = ReadFileToString(path, max_bytes);
  if (!contents.ok()) return Invalid(field, std::string(contents.status().message()));
  return contents;
}

absl::StatusOr<std::string> ReadPem(const std::string& field, const std::string& path,
                                    const char* kind) {
  absl::StatusOr<std::string> pem = ReadFieldFile(field, path, kMaxPemFileBytes);
  if (!pem.ok()) return pem;
  if (!absl::StrContains(*pem, "-----BEGIN ")) {
    return Invalid(field,
                   absl::StrCat("\"", path, "\" holds no PEM ", kind, " (no \"-----BEGIN\" line)"));
  }
  return pem;
}

// Checks a token; `source` says where it came from (never what it is).
absl::Status CheckToken(const std::string& field, const std::string& source,
                        const std::string& token) {
  if (token.empty()) return Invalid(field, absl::StrCat(source, " is empty"));
  if (token.size() > kMaxTokenBytes) {
    return Invalid(field, absl::StrCat(source, " holds more than ", kMaxTokenBytes, " bytes"));
  }
  for (char c : token) {
    if (c < 0x21 || c > 0x7e) {
      return Invalid(field, absl::StrCat(source,
                                         " must hold printable ASCII without spaces (it is sent "
                                         "as \"authorization: Bearer <token>\")"));
    }
  }
  return absl::OkStatus();
}

void StripOneNewline(std::string& text) {
  if (absl::EndsWith(text, "\r\n")) {
    text.resize(text.size() - 2);
  } else if (absl::EndsWith(text, "\n")) {
    text.resize(text.size() - 1);
  }
}

// The bearer token auth_token_file or auth_token_env names, checked;
// nullopt with neither.
absl::StatusOr<std::optional<std::string>> ReadToken(const retryd::v1::ControlConfig& control) {
  if (!control.auth_token_file().empty() && !control.auth_token_env().empty()) {
    return Invalid("auth_token_file", "set auth_token_file or auth_token_env, not both");
  }
  if (!control.auth_token_file().empty()) {
    absl::StatusOr<std::string> token =
        ReadFieldFile("auth_token_file", control.auth_token_file(), kMaxTokenFileBytes);
    if (!token.ok()) return token.status();
    StripOneNewline(*token);
    if (absl::Status s = CheckToken("auth_token_file",
                                    absl::StrCat("\"", control.auth_token_file(), "\""), *token);
        !s.ok()) {
      return s;
    }
    return *std::move(token);
  }
  if (control.auth_token_env().empty()) return std::nullopt;
  const char* value = std::getenv(control.auth_token_env().c_str());
  if (value == nullptr) {
    return Invalid("auth_token_env", absl::StrCat("the environment variable ",
                                                  control.auth_token_env(), " is not set"));
  }
  if (absl::Status s =
          CheckToken("auth_token_env",
                     absl::StrCat("the environment variable ", control.auth_token_env()), value);
      !s.ok()) {
    return s;
  }
  return std::string(value);
}

// The TLS material tls_cert_file, tls_key_file and tls_client_ca_file
// name, read; nullopt without TLS.
absl::StatusOr<std::optional<TlsOptions>> ReadTls(const retryd::v1::ControlConfig& control) {
  const bool cert = !control.tls_cert_file().empty();
  const bool key = !control.tls_key_file().empty();
  if (cert != key) {
    return Invalid(cert ? "tls_key_file" : "tls_cert_file",
                   "TLS needs both tls_cert_file and tls_key_file");
  }
  if (!control.tls_client_ca_file().empty() && !cert) {
    return Invalid("tls_client_ca_file",
                   "mutual TLS needs the server's own tls_cert_file and tls_key_file too");
  }
  if (!cert) return std::nullopt;
  TlsOptions tls;
  absl::StatusOr<std::string> chain =
      ReadPem("tls_cert_file", control.tls_cert_file(), "certificate");
  if (!chain.ok()) return chain.status();
  absl::StatusOr<std::string> private_key =
      ReadPem("tls_key_file", control.tls_key_file(), "private key");
  if (!private_key.ok()) return private_key.status();
  tls.cert_chain_pem = *std::move(chain);
  tls.private_key_pem = *std::move(private_key);
  if (!control.tls_client_ca_file().empty()) {
    absl::StatusOr<std::string> ca =
        ReadPem("tls_client_ca_file", control.tls_client_ca_file(), "CA certificate");
    if (!ca.ok()) return ca.status();
    tls.client_ca_pem = *std::move(ca);
  }
  return tls;
}

}  // namespace

absl::StatusOr<ControlServerOptions> ControlServerOptionsFromConfig(
    const retryd::v1::Config& config) {
  const retryd::v1::ControlConfig& control = config.control();
  ControlServerOptions options;
  options.listen_address =
      config.listen_address().empty() ? DefaultListenAddress() : config.listen_address();
  options.config = config;
  absl::StatusOr<std::optional<std::string>> token = ReadToken(control);
  if (!token.ok()) return token.status();
  options.auth_token = *std::move(token);
  if (control.read_only_requires_token() && !options.auth_token.has_value()) {
    return Invalid("read_only_requires_token",
                   "needs a token: set auth_token_file or auth_token_env");
  }
  options.read_only_requires_token = control.read_only_requires_token();
  absl::StatusOr<std::optional<TlsOptions>> tls = ReadTls(control);
  if (!tls.ok()) return tls.status();
  options.tls = *std::move(tls);
  options.allow_unauthenticated_remote = control.allow_unauthenticated_remote();
  options.metrics_address = config.metrics_address();
  options.console = config.http().console();
  options.console_read_only = config.http().console_read_only();
  options.allowed_hosts.assign(config.http().allowed_hosts().begin(),
                               config.http().allowed_hosts().end());
  // Checked by the config loader (required with TLS, a valid address).
  options.health_listen_address = control.health_listen_address();
  if (absl::Status s = CheckAuthenticationForAddress(options); !s.ok()) return s;
  return options;
}

}  // namespace retryd::control
