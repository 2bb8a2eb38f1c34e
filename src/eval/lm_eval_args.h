// lm-eval's "key=value,key=value" argument strings (--model_args, --gen_kwargs), read as its
// simple_parse_args_string reads them: items split at commas, each at its first "=", values
// converted by handle_arg_string ("true"/"false" to booleans, digits to integers, other numbers
// to floats, anything else kept as text).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace fission::eval {

nlohmann::ordered_json ParseArgString(const std::string& text);

// --gen_kwargs: a JSON object when the text starts with "{", else an argument string.
nlohmann::ordered_json ParseGenKwargs(const std::string& text);

}  // namespace fission::eval
