#pragma once
// The error every Kubernetes API call returns: what failed (HTTP status and the
// API's Status reason when the server answered, or the transport/TLS failure
// when it did not) and one readable message. Callers branch on the status or
// the helpers; the message is for logs.
//
//   hami::k8s::Result<nlohmann::json> pod = client.get(pod_path("default", "x"));
//   if (!pod && pod.error().not_found()) { ... }
//   if (!pod) hami::log::error("%s", pod.error().message.c_str());

#include <string>

#include "common/result.hpp"

namespace hami::k8s {

enum class ErrorKind {
  kHttp,       // the server answered with a non-success status
  kTransport,  // connect, read or write failed, or timed out
  kTls,        // TLS handshake or certificate verification failed
  kDecode,     // the server's answer is not the JSON we expect
  kInvalid,    // the caller's input was rejected before anything was sent
};

struct ApiError {
  ErrorKind kind = ErrorKind::kHttp;
  int status = 0;       // HTTP status; 0 when there was no answer
  std::string reason;   // Status.reason ("NotFound", "Conflict", "Expired", ...), may be empty
  std::string message;  // "<VERB> <path>: <status> <reason>: <server's message>"

  bool not_found() const { return status == 404; }
  bool conflict() const { return status == 409 && reason != "AlreadyExists"; }
  bool already_exists() const { return status == 409 && reason == "AlreadyExists"; }
  bool gone() const { return status == 410; }
  bool unauthorized() const { return status == 401; }
};

template <class T>
using Result = hami::Result<T, ApiError>;

}  // namespace hami::k8s
