// The webhook's AdmissionReview as the API server sends it: every body gets
// an AdmissionReview back (valid JSON, with a response); an allowed answer's
// patch is base64 of a JSONPatch that applies cleanly to the request's object.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "k8s/base64.hpp"
#include "scheduler/webhook.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using nlohmann::json;
  static const hami::scheduler::SchedulerConfig config;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const json out = json::parse(hami::scheduler::admit(input, config), nullptr, false);
  if (out.is_discarded() || !out.contains("response")) __builtin_trap();
  const json& resp = out["response"];
  if (!resp.contains("allowed") || !resp["allowed"].is_boolean()) __builtin_trap();
  if (!resp.contains("patch")) return 0;
  if (!resp["allowed"].get<bool>()) __builtin_trap();  // no patch on a refusal
  auto decoded = hami::k8s::base64_decode(resp["patch"].get<std::string>());
  if (!decoded) __builtin_trap();
  const json patch = json::parse(*decoded, nullptr, false);
  if (!patch.is_array()) __builtin_trap();
  const json in = json::parse(input, nullptr, false);
  try {
    (void)in["request"]["object"].patch(patch);
  } catch (const json::exception&) {
    __builtin_trap();  // our patch does not fit the pod it was made for
  }
  return 0;
}
