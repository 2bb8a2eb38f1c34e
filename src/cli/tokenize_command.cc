// `fission tokenize`: encode text, decode ids or render a chat with a model's tokenizer, for
// people debugging prompts. Output is one JSON object on stdout.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/json.h"
#include "cli/commands.h"
#include "tokenizer/chat_renderer.h"
#include "tokenizer/tokenizer.h"

namespace fission::cli {
namespace {

constexpr const char* kUsage =
    "usage: fission tokenize --model-path DIR [options] TEXT|-\n"
    "       fission tokenize --model-path DIR --decode 1,2,3 [--skip-special-tokens]\n"
    "       fission tokenize --model-path DIR --chat FILE.json [--chat-template FILE]\n\n"
    "  TEXT                    text to encode ('-' reads stdin); prints ids and tokens\n"
    "  --no-special-tokens     encode without the post-processor's special tokens\n"
    "  --decode IDS            comma-separated ids to decode\n"
    "  --skip-special-tokens   drop special tokens when decoding\n"
    "  --chat FILE.json        a messages array, or {\"messages\": [...], \"tools\": [...],\n"
    "                          \"add_generation_prompt\": bool, other template arguments}\n"
    "  --chat-template FILE    use this Jinja template instead of the model's\n"
    "  --add-generation-prompt render the assistant prompt after the messages\n";

std::string ReadAll(std::istream& in) {
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail(path, ": cannot open");
  return ReadAll(in);
}

std::vector<std::int32_t> ParseIds(const std::string& list) {
  std::vector<std::int32_t> ids;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    std::size_t b = item.find_first_not_of(" \t[]"), e = item.find_last_not_of(" \t[]");
    if (b == std::string::npos) continue;
    std::string digits = item.substr(b, e - b + 1);
    std::size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(digits, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != digits.size() || v < 0 || v > INT32_MAX) Fail("--decode: '", digits, "' is not a token id");
    ids.push_back(static_cast<std::int32_t>(v));
  }
  return ids;
}

Json TokensJson(const tokenizer::Tokenizer& tok, const std::vector<std::int32_t>& ids) {
  Json tokens = Json::array();
  for (std::int32_t id : ids) {
    auto t = tok.IdToToken(id);
    tokens.push_back(t ? Json(*t) : Json(nullptr));
  }
  return tokens;
}

void Print(const Json& j) {
  std::string s = j.dump(-1, ' ', false, Json::error_handler_t::replace);
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fputc('\n', stdout);
}

}  // namespace

int RunTokenize(const std::vector<std::string>& args) {
  std::optional<std::string> model_path, decode, chat, chat_template, text;
  bool special = true, skip_special = false, add_generation_prompt = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) Fail(a, " needs a value");
      return args[++i];
    };
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--model-path") {
      model_path = value();
    } else if (a == "--decode") {
      decode = value();
    } else if (a == "--chat") {
      chat = value();
    } else if (a == "--chat-template") {
      chat_template = value();
    } else if (a == "--no-special-tokens") {
      special = false;
    } else if (a == "--skip-special-tokens") {
      skip_special = true;
    } else if (a == "--add-generation-prompt") {
      add_generation_prompt = true;
    } else if (a.size() > 1 && a[0] == '-' && a[1] == '-') {
      Fail("unknown option ", a, "\n", kUsage);
    } else if (!text) {
      text = a;
    } else {
      Fail("more than one TEXT argument (quote the text)");
    }
  }
  if (!model_path) Fail("--model-path is required\n", kUsage);
  int modes = (decode ? 1 : 0) + (chat ? 1 : 0) + (text ? 1 : 0);
  if (modes != 1) Fail("give exactly one of TEXT, --decode or --chat\n", kUsage);
  auto tok = tokenizer::Tokenizer::Load(*model_path);

  if (decode) {
    std::vector<std::int32_t> ids = ParseIds(*decode);
    Print({{"text", tok->Decode(ids, skip_special)}, {"tokens", TokensJson(*tok, ids)}});
    return 0;
  }
  if (chat) {
    nlohmann::ordered_json file;
    try {
      file = nlohmann::ordered_json::parse(ReadTextFile(*chat));
    } catch (const nlohmann::json::exception& e) {
      Fail(*chat, ": not valid JSON: ", e.what());
    }
    tokenizer::ChatRenderOptions options;
    options.add_generation_prompt = add_generation_prompt;
    nlohmann::ordered_json messages;
    if (file.is_array()) {
      messages = file;
    } else if (file.is_object() && file.contains("messages")) {
      for (auto it = file.begin(); it != file.end(); ++it) {
        if (it.key() == "messages") {
          messages = it.value();
        } else if (it.key() == "tools") {
          options.tools = it.value();
        } else if (it.key() == "add_generation_prompt") {
          if (!it.value().is_boolean()) Fail(*chat, ": add_generation_prompt must be a boolean");
          options.add_generation_prompt = it.value().get<bool>();
        } else {
          options.extra[it.key()] = it.value();
        }
      }
    } else {
      Fail(*chat, ": expected a messages array or an object with \"messages\"");
    }
    // As the server: a deepseek_v32 model without a template renders with its own encoder.
    auto renderer =
        tokenizer::ChatRendererForModel(tok->config(), chat_template, tokenizer::ModelTypeOf(*model_path));
    std::string prompt = renderer->Apply(messages, options, tok->config());
    // The rendered prompt already holds its special tokens.
    std::vector<std::int32_t> ids = tok->Encode(prompt, false);
    Print({{"prompt", prompt}, {"ids", ids}, {"num_tokens", ids.size()}});
    return 0;
  }
  std::string input = *text == "-" ? ReadAll(std::cin) : *text;
  std::vector<std::int32_t> ids = tok->Encode(input, special);
  Print({{"ids", ids}, {"tokens", TokensJson(*tok, ids)}, {"num_tokens", ids.size()}});
  return 0;
}

FISSION_COMMAND("tokenize", "encode, decode or render a chat with a model's tokenizer", RunTokenize);

}  // namespace fission::cli
