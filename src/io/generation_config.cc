#include "io/generation_config.h"

#include <filesystem>
#include <limits>

#include "base/error.h"
#include "base/json.h"

namespace fission::io {
namespace {

std::int32_t EosId(const Json& v, const std::string& where) {
  if (!v.is_number_integer()) Fail(where, " must be an integer token id, got ", v.dump());
  const std::int64_t id = v.get<std::int64_t>();
  if (id < 0 || id > std::numeric_limits<std::int32_t>::max()) Fail(where, " must be a token id >= 0, got ", id);
  return static_cast<std::int32_t>(id);
}

}  // namespace

std::vector<std::int32_t> ReadEosTokenIds(const std::string& model_dir) {
  for (const char* name : {"generation_config.json", "config.json"}) {
    const std::string path = model_dir + "/" + name;
    if (!std::filesystem::exists(path)) continue;
    const Json config = ReadJsonFile(path);
    auto it = config.find("eos_token_id");
    if (it == config.end() || it->is_null()) continue;
    const std::string where = StrCat(path, ": field 'eos_token_id'");
    if (!it->is_array()) return {EosId(*it, where)};
    std::vector<std::int32_t> ids;
    for (std::size_t i = 0; i < it->size(); ++i) ids.push_back(EosId((*it)[i], StrCat(where, "[", i, "]")));
    return ids;
  }
  return {};
}

}  // namespace fission::io
