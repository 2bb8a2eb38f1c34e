#include "serving_bench/block_format.h"

#include <cstdio>

namespace fission::serving_bench {

std::string BlockRow(const std::string& label, const std::string& value) {
  std::string out = label;
  if (out.size() < 40) out.append(40 - out.size(), ' ');
  out += ' ';
  out += value;
  if (value.size() < 10) out.append(10 - value.size(), ' ');
  return out + "\n";
}

std::string Fixed2(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f", v);
  return buf;
}

std::string BlockRule(const std::string& title, char fill) {
  const size_t width = 50;
  if (title.size() >= width) return title + "\n";
  const size_t pad = width - title.size();
  return std::string(pad / 2, fill) + title + std::string(pad - pad / 2, fill) + "\n";
}

}  // namespace fission::serving_bench
