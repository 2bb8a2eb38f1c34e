// Requests, their sequences, and what the engine reports back.
//
// A request is a prompt with sampling parameters; it has `n` sequences (completions), each of which
// is scheduled, preempted and finished on its own. A sequence's tokens are its prompt followed by
// the tokens generated so far; `num_computed` of them have their KV rows in the cache.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/detokenizer.h"
#include "engine/sampling_params.h"

namespace fission::engine {

enum class FinishReason : std::uint8_t {
  kNone,    // still running
  kLength,  // max_new_tokens, or the model's context length
  kStop,    // EOS, a stop token or a stop string
  kAbort,   // aborted by the client, or failed (see RequestOutput::error)
};
std::string_view FinishReasonName(FinishReason reason);  // "", "length", "stop", "abort"

struct TopLogprob {
  std::int32_t token_id = 0;
  float logprob = 0.0f;
};

// The log-probability of one token, with the most likely alternatives at that position.
struct TokenLogprob {
  std::int32_t token_id = 0;
  float logprob = 0.0f;
  std::vector<TopLogprob> top;  // `top_logprobs` entries, most likely first
};

// One report for one sequence, delivered by the engine thread after each step in which the
// sequence produced something. Token ids and text are deltas since the previous report.
struct RequestOutput {
  std::int64_t request_id = 0;
  std::int32_t index = 0;  // which of the request's n completions
  std::vector<std::int32_t> token_ids;
  std::vector<TokenLogprob> logprobs;         // one per token in token_ids when logprobs was asked
  std::vector<TokenLogprob> prompt_logprobs;  // prompt tokens 1.. (token 0 has none); once, in the first report
  std::string text;  // text delta (with a Detokenizer); text that may begin a stop string is held back
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  // The stop string or stop token that ended the sequence (matched_stop in SGLang).
  std::optional<std::string> matched_stop_string;
  std::optional<std::int32_t> matched_stop_token;
  std::string error;  // why a kAbort happened, when it was not the client's abort
  // Usage, current as of this report.
  std::int32_t prompt_tokens = 0;
  std::int32_t completion_tokens = 0;
  std::int32_t cached_tokens = 0;  // prompt tokens served from the prefix cache at first admission
};

// Called on the engine thread; must not block for long and must not call back into Step().
using OutputCallback = std::function<void(const RequestOutput&)>;

struct Request {
  std::vector<std::int32_t> prompt_ids;
  SamplingParams params;
  OutputCallback callback;
};

enum class SequenceStatus : std::uint8_t { kWaiting, kRunning, kFinished };

struct Sequence {
  std::int64_t request_id = 0;
  std::int32_t index = 0;
  // FCFS order: the order of submission, kept across preemption.
  std::uint64_t arrival = 0;
  std::shared_ptr<const SamplingParams> params;
  std::uint64_t seed = 0;  // this sequence's sampler seed
  int dp_group = 0;        // the DP attention group that runs it (engine/data_parallel.h)

  std::vector<std::int32_t> tokens;  // prompt, then the generated tokens
  std::int32_t prompt_len = 0;
  std::int32_t num_computed = 0;  // tokens whose KV rows are in the cache
  std::vector<std::int32_t> pages;  // block table; one pool reference per page
  // Prefix-cache bookkeeping: the first `num_tree_pages` pages lie on the tree path ending at
  // `tree_node` (a PrefixCache::Node*).
  void* tree_node = nullptr;
  std::int32_t num_tree_pages = 0;
  // The state slot of a model with per-request memory, held while running (-1: none).
  std::int32_t state_slot = -1;
  // Speculative decoding: the draft tokens proposed for positions num_tokens().. (the next step
  // verifies them); empty when the sequence has none.
  std::vector<std::int32_t> drafts;

  SequenceStatus status = SequenceStatus::kWaiting;
  FinishReason finish_reason = FinishReason::kNone;
  std::string error;
  bool abort_requested = false;
  std::int32_t num_preemptions = 0;
  std::int32_t cached_tokens = -1;  // prefix-cache hit at first admission (-1: not yet admitted)

  // Sampling state.
  std::unordered_map<std::int32_t, std::int32_t> output_counts;  // for frequency/presence penalties
  std::unordered_set<std::int32_t> seen_tokens;                   // prompt and output, for repetition
  std::vector<TokenLogprob> logprobs;         // of generated tokens
  std::vector<TokenLogprob> prompt_logprobs;  // of prompt tokens 1..prompt_len-1, as computed
  std::unique_ptr<TokenMatcher> matcher;      // with a constraint: where the output stands in it

  // Reporting state.
  std::size_t reported_tokens = 0;
  std::size_t reported_logprobs = 0;
  bool reported_prompt_logprobs = false;
  std::size_t reported_text_bytes = 0;
  std::string text;  // decoded output text (only kept with a Detokenizer)
  std::unique_ptr<TextStream> text_stream;
  std::optional<std::string> matched_stop_string;
  std::optional<std::int32_t> matched_stop_token;

  std::int32_t num_tokens() const { return static_cast<std::int32_t>(tokens.size()); }
  std::int32_t num_output() const { return num_tokens() - prompt_len; }
  bool finished() const { return status == SequenceStatus::kFinished; }
};

}  // namespace fission::engine
