// Field readers shared by the config.json parsers of the io layer (model_config.cc and the
// per-family parts, model_config_v4.cc). Every problem is an Error naming `where` and the field.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "base/json.h"
#include "io/model_config.h"

namespace fission::io {

void RequirePositive(std::int64_t value, const char* field, const std::string& where);
// A per-layer list of strings, each one of `allowed`; nullopt when absent or null.
std::optional<std::vector<std::string>> GetLayerList(const Json& json, const char* field, const std::string& where,
                                                     std::int64_t layers,
                                                     std::initializer_list<const char*> allowed);
// One rope parameter object (`rope_parameters`, `rope_scaling`, or a V4 rope type's entry):
// default or YaRN, `theta` unless it names its own rope_theta.
RopeConfig ParseRopeParams(const Json& params, const std::string& params_where, double theta);
// DeepSeek-V4's own fields (model_config_v4.cc), into c.v4 and the shared attention dims; then,
// once the indexer's fields are read too, the checks across them.
void ParseV4(const Json& json, const std::string& where, ModelConfig& c);
void CheckV4Fits(const ModelConfig& c, const std::string& where);

}  // namespace fission::io
