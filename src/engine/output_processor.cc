#include "engine/output_processor.h"

#include <algorithm>

#include "base/error.h"

namespace fission::engine {

OutputProcessor::OutputProcessor(const Detokenizer* detokenizer, std::vector<std::int32_t> eos_token_ids,
                                 std::int32_t max_context_len)
    : detokenizer_(detokenizer), eos_token_ids_(std::move(eos_token_ids)), max_context_len_(max_context_len) {}

void OutputProcessor::SetFinished(Sequence* seq, FinishReason reason, std::string error) {
  if (seq->finish_reason != FinishReason::kNone) return;
  seq->finish_reason = reason;
  seq->error = std::move(error);
}

void OutputProcessor::Append(Sequence* seq, std::int32_t token, const TokenLogprob* logprob) {
  FISSION_CHECK(seq->finish_reason == FinishReason::kNone);
  const SamplingParams& p = *seq->params;
  seq->tokens.push_back(token);
  ++seq->output_counts[token];
  if (p.repetition_penalty != 1.0) seq->seen_tokens.insert(token);
  if (logprob != nullptr) seq->logprobs.push_back(*logprob);
  const std::int32_t num_output = seq->num_output();
  const bool may_stop = num_output >= p.min_new_tokens;

  if (may_stop) {
    if (std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), token) != p.stop_token_ids.end() ||
        (!p.ignore_eos && std::find(eos_token_ids_.begin(), eos_token_ids_.end(), token) != eos_token_ids_.end())) {
      seq->matched_stop_token = token;
      SetFinished(seq, FinishReason::kStop);
    }
  }
  if (detokenizer_ != nullptr) {
    if (seq->text_stream == nullptr) seq->text_stream = detokenizer_->NewStream();
    const std::size_t previous = seq->text.size();
    seq->text += seq->text_stream->Append(token);
    if (may_stop && seq->finish_reason == FinishReason::kNone && !p.stop.empty() && seq->text.size() > previous) {
      // A new match must end in the new text; start early enough to catch one that straddles.
      std::size_t max_len = 0;
      for (const std::string& s : p.stop) max_len = std::max(max_len, s.size());
      const std::size_t from = previous >= max_len ? previous - max_len + 1 : 0;
      std::size_t best = std::string::npos;
      const std::string* matched = nullptr;
      for (const std::string& s : p.stop) {
        const std::size_t at = seq->text.find(s, from);
        if (at != std::string::npos && at < best) {
          best = at;
          matched = &s;
        }
      }
      if (matched != nullptr) {
        seq->matched_stop_string = *matched;
        seq->text.resize(best);
        SetFinished(seq, FinishReason::kStop);
      }
    }
  }
  if (seq->finish_reason == FinishReason::kNone &&
      (num_output >= p.max_new_tokens || seq->num_tokens() >= max_context_len_))
    SetFinished(seq, FinishReason::kLength);
  // Text held back by the stream (an incomplete character) is final now, unless a stop string cut it.
  if (detokenizer_ != nullptr && seq->finish_reason != FinishReason::kNone && !seq->matched_stop_string)
    seq->text += seq->text_stream->Flush();
}

std::size_t StopPrefixHoldback(const std::string& text, const std::vector<std::string>& stops) {
  std::size_t hold = 0;
  for (const std::string& s : stops) {
    for (std::size_t len = std::min(s.size() - 1, text.size()); len > hold; --len) {
      if (text.compare(text.size() - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  return hold;
}

bool OutputProcessor::MakeReport(Sequence* seq, bool finished, RequestOutput* out) {
  const std::size_t num_output = static_cast<std::size_t>(seq->num_output());
  *out = RequestOutput{};
  out->request_id = seq->request_id;
  out->index = seq->index;
  bool any = false;
  if (seq->reported_tokens < num_output) {
    out->token_ids.assign(seq->tokens.begin() + seq->prompt_len + seq->reported_tokens, seq->tokens.end());
    seq->reported_tokens = num_output;
    any = true;
  }
  if (seq->reported_logprobs < seq->logprobs.size()) {
    out->logprobs.assign(seq->logprobs.begin() + seq->reported_logprobs, seq->logprobs.end());
    seq->reported_logprobs = seq->logprobs.size();
  }
  if (seq->params->prompt_logprobs && !seq->reported_prompt_logprobs &&
      (static_cast<std::int32_t>(seq->prompt_logprobs.size()) >= seq->prompt_len - 1 || finished)) {
    out->prompt_logprobs = seq->prompt_logprobs;
    seq->reported_prompt_logprobs = true;
    any = true;
  }
  if (detokenizer_ != nullptr) {
    std::size_t visible = seq->text.size();
    if (!finished) visible -= StopPrefixHoldback(seq->text, seq->params->stop);
    if (visible > seq->reported_text_bytes) {
      out->text = seq->text.substr(seq->reported_text_bytes, visible - seq->reported_text_bytes);
      seq->reported_text_bytes = visible;
      any = true;
    }
  }
  out->finished = finished;
  if (finished) {
    out->finish_reason = seq->finish_reason;
    out->error = seq->error;
    out->matched_stop_string = seq->matched_stop_string;
    out->matched_stop_token = seq->matched_stop_token;
    any = true;
  }
  out->prompt_tokens = seq->prompt_len;
  out->completion_tokens = static_cast<std::int32_t>(num_output);
  out->cached_tokens = std::max(0, seq->cached_tokens);
  return any;
}

}  // namespace fission::engine
