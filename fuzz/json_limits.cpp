// check_json_limits against nlohmann's parser: on every text the parser
// accepts, the scan's verdict holds. Passing means the parse stays within the
// bounds (depth at most max_depth, values at most max_values); a depth
// refusal means the text really is deeper. The first two bytes pick the
// bounds, so small ones get exercised.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "common/json_limits.hpp"

namespace {

using nlohmann::json;

// Counts what the DOM parser would build: depth and values (keys included).
struct Shape : nlohmann::json_sax<json> {
  int depth = 0, max_depth = 0;
  size_t values = 0;
  bool value() {
    ++values;
    return true;
  }
  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool start_object(std::size_t) override { return open(); }
  bool start_array(std::size_t) override { return open(); }
  bool key(string_t&) override { return value(); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }
  bool open() {
    ++values;
    if (++depth > max_depth) max_depth = depth;
    return true;
  }
  bool close() {
    --depth;
    return true;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const hami::JsonLimits limits{.max_depth = 1 + data[0] % 16, .max_values = 1 + data[1] % 64u};
  const std::string_view text(reinterpret_cast<const char*>(data) + 2, size - 2);
  const auto verdict = hami::check_json_limits(text, limits);
  // nlohmann takes a NUL outside a string as the end of the input: it then
  // parses less than the scan saw, never more, so only the scan's verdict on
  // the part before it could be compared. Skip such inputs.
  if (text.find('\0') != std::string_view::npos) return 0;
  Shape shape;
  if (!json::sax_parse(text, &shape, json::input_format_t::json, /*strict=*/true)) return 0;
  if (verdict) {
    if (shape.max_depth > limits.max_depth) __builtin_trap();
    if (shape.values > limits.max_values) __builtin_trap();
  } else if (verdict.error().message.find("nested deeper") != std::string::npos &&
             shape.max_depth <= limits.max_depth) {
    __builtin_trap();
  }
  return 0;
}
