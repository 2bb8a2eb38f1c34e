#include "tokenizer/tokenizer_config.h"

#include <filesystem>

#include "tokenizer/component_json.h"

namespace fission::tokenizer {
namespace {

// Special tokens are a string, an AddedToken-like object with "content", or null.
std::optional<std::string> TokenField(const Json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) return GetString(*it, "content", StrCat(where, ".", key));
  Fail(where, ".", key, ": expected a string or an object with \"content\"");
}

std::optional<bool> OptionalBool(const Json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) Fail(where, ".", key, ": expected a boolean");
  return it->get<bool>();
}

}  // namespace

Json ReadJsonOrFail(const std::string& path) {
  try {
    return ReadJsonFile(path);
  } catch (const nlohmann::json::exception& e) {
    // ParseJson reports syntax errors; nlohmann throws others (number overflow) itself.
    Fail(path, ": invalid JSON: ", e.what());
  }
}

TokenizerConfig TokenizerConfig::FromJson(const Json& j, const std::string& where) {
  if (!j.is_object()) Fail(where, ": expected an object");
  TokenizerConfig c;
  c.bos_token = TokenField(j, "bos_token", where);
  c.eos_token = TokenField(j, "eos_token", where);
  c.pad_token = TokenField(j, "pad_token", where);
  c.unk_token = TokenField(j, "unk_token", where);
  c.add_bos_token = OptionalBool(j, "add_bos_token", where);
  c.add_eos_token = OptionalBool(j, "add_eos_token", where);
  c.clean_up_tokenization_spaces = OptBool(j, "clean_up_tokenization_spaces", where, false);
  c.tokenizer_class = OptString(j, "tokenizer_class", where, "");
  if (auto it = j.find("chat_template"); it != j.end() && !it->is_null()) {
    if (it->is_string()) {
      c.chat_template = it->get<std::string>();
    } else if (it->is_array()) {
      // Named templates: [{"name": ..., "template": ...}]; the "default" one applies.
      for (const Json& entry : *it) {
        if (entry.is_object() && entry.contains("name") && entry["name"] == "default") {
          c.chat_template = GetString(entry, "template", where + ".chat_template[default]");
        }
      }
    } else {
      Fail(where, ".chat_template: expected a string or a list of named templates");
    }
  }
  return c;
}

TokenizerConfig TokenizerConfig::Load(const std::string& dir) {
  std::string path = (std::filesystem::path(dir) / "tokenizer_config.json").string();
  TokenizerConfig c;
  if (std::filesystem::exists(path)) c = FromJson(ReadJsonOrFail(path), path);
  // A chat_template.jinja file next to it takes precedence, as in transformers.
  std::string jinja = (std::filesystem::path(dir) / "chat_template.jinja").string();
  if (std::filesystem::exists(jinja)) {
    std::FILE* f = std::fopen(jinja.c_str(), "rb");
    if (f == nullptr) Fail(jinja, ": cannot open");
    std::string text;
    char buf[65536];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, n);
    std::fclose(f);
    c.chat_template = std::move(text);
  }
  return c;
}

}  // namespace fission::tokenizer
