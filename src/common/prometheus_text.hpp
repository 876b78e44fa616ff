#pragma once
// Writes the Prometheus text exposition format (version 0.0.4), the body of a
// /metrics response. prometheus-cpp is not packaged by Debian, and the format is
// small: one "# HELP" and "# TYPE" line per family, then one line per sample,
// label values escaped (\\, \", \n) and any byte of them that is not UTF-8
// replaced by U+FFFD (the page must be UTF-8; labels come from file names
// too). Integers are written exactly (byte counts above 2^53 would lose
// digits through a double).
//
//   hami::PrometheusText out;
//   out.family("hami_vgpu_memory_used_bytes", "Device memory the container uses.");
//   out.sample("hami_vgpu_memory_used_bytes", {{"pod", "web-0"}, {"vdevice_index", "0"}}, 1u <<
//   30); std::string body = out.take();  // Content-Type: PrometheusText::kContentType

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

namespace hami {

struct MetricLabel {
  std::string_view name;
  std::string_view value;
};

class PrometheusText {
 public:
  static constexpr std::string_view kContentType = "text/plain; version=0.0.4; charset=utf-8";

  // Labels added to every sample after the sample's own (upstream: zone="vGPU").
  void set_const_labels(std::initializer_list<MetricLabel> labels);

  // Starts a family; `type` is gauge, counter, histogram, summary or untyped.
  void family(std::string_view name, std::string_view help, std::string_view type = "gauge");

  void sample(std::string_view name, std::span<const MetricLabel> labels, uint64_t value);
  void sample(std::string_view name, std::span<const MetricLabel> labels, int64_t value);
  void sample(std::string_view name, std::span<const MetricLabel> labels, double value);
  void sample(std::string_view name, std::initializer_list<MetricLabel> labels, uint64_t value) {
    sample(name, std::span<const MetricLabel>(labels.begin(), labels.size()), value);
  }
  void sample(std::string_view name, std::initializer_list<MetricLabel> labels, int64_t value) {
    sample(name, std::span<const MetricLabel>(labels.begin(), labels.size()), value);
  }
  void sample(std::string_view name, std::initializer_list<MetricLabel> labels, double value) {
    sample(name, std::span<const MetricLabel>(labels.begin(), labels.size()), value);
  }

  const std::string& text() const { return out_; }
  std::string take() { return std::move(out_); }
  void reserve(size_t bytes) { out_.reserve(bytes); }

 private:
  void begin_sample(std::string_view name, std::span<const MetricLabel> labels);
  template <class Int>
  void sample_integer(std::string_view name, std::span<const MetricLabel> labels, Int value);
  void append_escaped(std::string_view value);

  std::string out_;
  std::string const_labels_;  // pre-rendered: name="value",...
};

}  // namespace hami
