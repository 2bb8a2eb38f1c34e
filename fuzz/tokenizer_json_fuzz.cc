// Fuzzes loading tokenizer.json: any input must either load or fail with fission::Error (never
// crash or throw anything else); a loaded tokenizer encodes and decodes a fixed text.
#include <cstdint>
#include <string>

#include "base/error.h"
#include "base/json.h"
#include "tokenizer/hf_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace fission;
  std::string text(reinterpret_cast<const char*>(data), size);
  try {
    Json j;
    try {
      j = ParseJson(text, "fuzz.json");
    } catch (const nlohmann::json::exception&) {
      return 0;  // number overflow: reported by Tokenizer::Load as an Error
    }
    tokenizer::HfTokenizer tok(j, tokenizer::TokenizerConfig{}, "fuzz.json");
    auto ids = tok.Encode("Hello wörld 123 <|im_end|>  \n\t!", true);
    tok.Decode(ids, false);
    tok.Decode(ids, true);
  } catch (const Error&) {
  }
  return 0;
}
