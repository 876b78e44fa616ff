#include "common/prometheus_text.hpp"

#include <charconv>
#include <cmath>

#include "common/text.hpp"

namespace hami {

void PrometheusText::set_const_labels(std::initializer_list<MetricLabel> labels) {
  std::string saved;
  saved.swap(out_);
  for (const MetricLabel& l : labels) {
    if (!out_.empty()) out_ += ',';
    out_ += l.name;
    out_ += "=\"";
    append_escaped(l.value);
    out_ += '"';
  }
  const_labels_.swap(out_);
  out_.swap(saved);
}

void PrometheusText::family(std::string_view name, std::string_view help, std::string_view type) {
  out_ += "# HELP ";
  out_ += name;
  out_ += ' ';
  // HELP text escapes only backslash and newline.
  for (char c : help) {
    if (c == '\\') {
      out_ += "\\\\";
    } else if (c == '\n') {
      out_ += "\\n";
    } else {
      out_ += c;
    }
  }
  out_ += "\n# TYPE ";
  out_ += name;
  out_ += ' ';
  out_ += type;
  out_ += '\n';
}

void PrometheusText::append_escaped(std::string_view value) {
  for (size_t i = 0; i < value.size();) {
    const char c = value[i];
    if (static_cast<unsigned char>(c) >= 0x80) {
      // Label values come from file names too, which are bytes; the format is
      // UTF-8 and one bad byte makes a scraper drop the whole page.
      const size_t n = utf8_sequence_length(value, i);
      if (n == 0) {
        out_ += "\xef\xbf\xbd";  // U+FFFD, the replacement character
        ++i;
      } else {
        out_.append(value.substr(i, n));
        i += n;
      }
      continue;
    }
    switch (c) {
      case '\\':
        out_ += "\\\\";
        break;
      case '"':
        out_ += "\\\"";
        break;
      case '\n':
        out_ += "\\n";
        break;
      default:
        out_ += c;
    }
    ++i;
  }
}

void PrometheusText::begin_sample(std::string_view name, std::span<const MetricLabel> labels) {
  out_ += name;
  if (labels.empty() && const_labels_.empty()) {
    out_ += ' ';
    return;
  }
  out_ += '{';
  bool first = true;
  for (const MetricLabel& l : labels) {
    if (!first) out_ += ',';
    first = false;
    out_ += l.name;
    out_ += "=\"";
    append_escaped(l.value);
    out_ += '"';
  }
  if (!const_labels_.empty()) {
    if (!first) out_ += ',';
    out_ += const_labels_;
  }
  out_ += "} ";
}

template <class Int>
void PrometheusText::sample_integer(std::string_view name, std::span<const MetricLabel> labels,
                                    Int value) {
  begin_sample(name, labels);
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, value);
  out_.append(buf, r.ptr);
  out_ += '\n';
}

void PrometheusText::sample(std::string_view name, std::span<const MetricLabel> labels,
                            uint64_t value) {
  sample_integer(name, labels, value);
}

void PrometheusText::sample(std::string_view name, std::span<const MetricLabel> labels,
                            int64_t value) {
  sample_integer(name, labels, value);
}

void PrometheusText::sample(std::string_view name, std::span<const MetricLabel> labels,
                            double value) {
  begin_sample(name, labels);
  if (std::isnan(value)) {
    out_ += "NaN";
  } else if (std::isinf(value)) {
    out_ += value > 0 ? "+Inf" : "-Inf";
  } else {
    char buf[32];
    auto r = std::to_chars(buf, buf + sizeof buf, value);
    out_.append(buf, r.ptr);
  }
  out_ += '\n';
}

}  // namespace hami
