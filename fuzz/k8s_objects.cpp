// Pod and Node JSON as the API server, kube-scheduler (extender arguments) and
// webhooks send it, with the timestamps and base64 inside (quantities: fit_options). Parsing
// must answer every input with a value or an error: no crash, no exception.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "k8s/base64.hpp"
#include "k8s/objects.hpp"
#include "k8s/time.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)hami::k8s::parse_time(text);
  if (auto decoded = hami::k8s::base64_decode(text)) {
    // What decodes must encode back to the same bytes once whitespace is gone.
    if (*hami::k8s::base64_decode(hami::k8s::base64_encode(*decoded)) != *decoded) {
      __builtin_trap();
    }
  }

  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  (void)hami::k8s::Pod::from_json(j);
  (void)hami::k8s::Node::from_json(j);
  return 0;
}
