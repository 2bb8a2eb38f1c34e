// After a token is sampled: append it, decide whether the sequence is finished (stop tokens, EOS,
// stop strings matched on the decoded text across token boundaries, length), and build the
// incremental report the client sees.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/detokenizer.h"
#include "engine/request.h"

namespace fission::engine {

class OutputProcessor {
 public:
  // `detokenizer` may be null: then stop strings cannot match and reports carry no text.
  OutputProcessor(const Detokenizer* detokenizer, std::vector<std::int32_t> eos_token_ids,
                  std::int32_t max_context_len);

  // Appends `token` (with its logprob when asked) and sets the finish reason if it ends the sequence.
  void Append(Sequence* seq, std::int32_t token, const TokenLogprob* logprob);
  // Marks a sequence finished for `reason` (length, abort) unless it already is.
  static void SetFinished(Sequence* seq, FinishReason reason, std::string error = {});
  // Fills `out` with what `seq` produced since its previous report; false if there is nothing new.
  // `finished` says the sequence is finished and this is its last report.
  bool MakeReport(Sequence* seq, bool finished, RequestOutput* out);

  const Detokenizer* detokenizer() const { return detokenizer_; }

 private:
  const Detokenizer* detokenizer_;
  std::vector<std::int32_t> eos_token_ids_;
  std::int32_t max_context_len_;
};

// Bytes at the end of `text` that may be the start of one of `stops` (held back from streaming).
std::size_t StopPrefixHoldback(const std::string& text, const std::vector<std::string>& stops);

}  // namespace fission::engine
