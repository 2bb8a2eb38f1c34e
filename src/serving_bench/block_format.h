// The formatting both printed result blocks share, as Python writes it: "{:<40} {:<10}" rows,
// "{:.2f}" numbers and "{s:{c}^{n}}" rules centred in 50 columns.
#pragma once

#include <string>

namespace fission::serving_bench {

// Python's "{:<40} {:<10}".format(label, value), with a newline.
std::string BlockRow(const std::string& label, const std::string& value);
// "%.2f".
std::string Fixed2(double v);
// Python's "{s:{c}^{n}}" with n = 50: centred, the odd fill character going to the right.
std::string BlockRule(const std::string& title, char fill);

}  // namespace fission::serving_bench
