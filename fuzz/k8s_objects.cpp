// Pod and Node JSON as the API server, kube-scheduler (extender arguments) and
// webhooks send it, with the quantities, timestamps and base64 inside. Parsing
// must answer every input with a value or an error: no crash, no exception.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "k8s/base64.hpp"
#include "k8s/objects.hpp"
#include "k8s/quantity.hpp"
#include "k8s/time.hpp"

namespace {

void quantities(const hami::k8s::StringMap& m) {
  for (const auto& [name, value] : m) {
    auto q = hami::k8s::parse_quantity(value);
    auto milli = hami::k8s::parse_milli_quantity(value);
    // A whole number is also a whole number of thousandths, unless that overflows.
    if (q && milli && *milli % 1000 != 0) __builtin_trap();
    if (!q && q.error().message.empty()) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)hami::k8s::parse_quantity(text);
  (void)hami::k8s::parse_milli_quantity(text);
  (void)hami::k8s::parse_time(text);
  if (auto decoded = hami::k8s::base64_decode(text)) {
    // What decodes must encode back to the same bytes once whitespace is gone.
    if (*hami::k8s::base64_decode(hami::k8s::base64_encode(*decoded)) != *decoded) {
      __builtin_trap();
    }
  }

  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  if (auto pod = hami::k8s::Pod::from_json(j)) {
    for (const auto* list : {&pod->init_containers, &pod->containers}) {
      for (const auto& c : *list) {
        quantities(c.limits);
        quantities(c.requests);
      }
    }
  }
  if (auto node = hami::k8s::Node::from_json(j)) {
    quantities(node->capacity);
    quantities(node->allocatable);
  }
  return 0;
}
