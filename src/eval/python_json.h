// Python's json.dumps(value, ensure_ascii=False) byte for byte (separators ", " and ": "; with an
// indent, one item per line), so that texts lm-eval hashes (a document as
// json.dumps(doc, indent=2), a chat as json.dumps(messages)) hash the same here.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace fission::eval {

// indent < 0: one line.
std::string PythonJsonDumps(const nlohmann::ordered_json& value, int indent = -1);

}  // namespace fission::eval
