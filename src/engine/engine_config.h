// Engine settings and their command-line flags (named as SGLang's launch_server names them).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fission::engine {

// The KV pool's size: a model in host memory gets --max-total-tokens (default
// kDefaultMaxTotalTokens); a model on a device gets what --mem-fraction-static leaves after the
// weights (free - total * (1 - fraction), the smallest over its devices), capped by
// --max-total-tokens when that is given, as SGLang does.
inline constexpr std::int64_t kDefaultMaxTotalTokens = 16384;
inline constexpr double kDefaultMemFractionStatic = 0.85;

// Speculative decoding with the model's own draft (NextN / MTP) layer (SGLang's
// --speculative-* flags). NEXTN and EAGLE are the same here: chained drafts of one token each
// (topk 1), `num_steps` of them per verify run of num_steps + 1 tokens.
struct SpeculativeConfig {
  std::string algorithm;            // --speculative-algorithm: "" (off), NEXTN or EAGLE
  std::int32_t num_steps = 0;       // --speculative-num-steps: drafts per sequence and step (0: 3)
  std::int32_t eagle_topk = 0;      // --speculative-eagle-topk: only 1 (0: 1)
  std::int32_t num_draft_tokens = 0;  // --speculative-num-draft-tokens: num_steps + 1 (0: that)
  // --speculative-accept-all-for-benchmark: every draft is accepted, so outputs are NOT the
  // model's; a benchmark mode for dummy weights (whose drafts are never accepted) that measures
  // the time of verify runs that keep every draft. Off unless the flag is given.
  bool accept_all_for_benchmark = false;

  bool enabled() const { return !algorithm.empty(); }
  // Drafts per verify run, defaults applied (SGLang's choice for DeepSeek: 3 steps, topk 1, 4 tokens).
  std::int32_t drafts() const { return num_steps > 0 ? num_steps : 3; }
  // An Error naming the flag: an algorithm other than NEXTN or EAGLE, steps outside [1, 16], a topk
  // other than 1 (tree drafts have not landed), draft tokens other than steps + 1.
  void Validate() const;
};

struct EngineConfig {
  std::int32_t page_size = 16;                // --page-size: tokens per KV page
  std::int64_t max_total_tokens = 0;          // --max-total-tokens: KV pool size in tokens; 0: not given
  double mem_fraction_static = 0;             // --mem-fraction-static; 0: kDefaultMemFractionStatic
  std::int64_t kv_cache_bytes = 0;            // a byte budget (tests, tools); 0: size as below
  std::int32_t chunked_prefill_size = 8192;   // --chunked-prefill-size: <= 0 disables chunking
  std::int32_t max_prefill_tokens = 16384;    // --max-prefill-tokens
  std::int32_t max_running_requests = 256;    // --max-running-requests
  bool disable_radix_cache = false;           // --disable-radix-cache
  std::uint64_t random_seed = 0;              // --random-seed: seeds requests that bring none
  std::int32_t context_length = 0;            // --context-length: 0 takes the model's
  std::vector<std::int32_t> eos_token_ids;    // from the checkpoint's config (not a flag)
  SpeculativeConfig speculative;              // --speculative-*: needs a model with a draft layer
  // --load-balance-method: how new requests are placed in DP attention groups (round_robin or
  // shortest_queue; engine/data_parallel.h).
  std::string load_balance_method = "round_robin";

  // Throws fission::Error naming the flag and its allowed range.
  void Validate() const;
};

// If args[*i] is an engine flag (as `--flag value` or `--flag=value`), applies it, advances *i past
// it and returns true. A bad value throws fission::Error naming the flag.
bool ParseEngineFlag(const std::vector<std::string>& args, std::size_t* i, EngineConfig* config);

// Help text for the engine flags.
std::string EngineFlagsHelp();

}  // namespace fission::engine
