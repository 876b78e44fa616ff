#pragma once
// Kubernetes timestamps: metav1.Time ("2024-05-01T10:00:00Z", whole seconds) and
// metav1.MicroTime ("2024-05-01T10:00:00.123456Z", used by Leases), both RFC 3339
// in UTC when we write them. Parsing accepts any RFC 3339 form (fraction of any
// length, "Z" or a numeric offset).
//
//   std::string t = hami::k8s::format_micro_time(std::chrono::system_clock::now());
//   auto back = hami::k8s::parse_time(t);   // Result<system_clock::time_point>

#include <chrono>
#include <string>
#include <string_view>

#include "common/result.hpp"

namespace hami::k8s {

using TimePoint = std::chrono::system_clock::time_point;

std::string format_time(TimePoint t);        // seconds precision
std::string format_micro_time(TimePoint t);  // microseconds
hami::Result<TimePoint> parse_time(std::string_view text);

}  // namespace hami::k8s
