#include "engine/engine_config.h"

#include "engine/data_parallel.h"

#include <charconv>
#include <cstdlib>
#include <limits>

#include "base/error.h"

namespace fission::engine {

namespace {

template <typename T>
T ParseInteger(const std::string& flag, const std::string& value) {
  T out{};
  const char* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, out);
  if (ec != std::errc() || ptr != end || value.empty()) Fail(flag, " expects an integer, got '", value, "'");
  return out;
}

// A fraction in (0, 1].
double ParseFraction(const std::string& flag, const std::string& value) {
  char* end = nullptr;
  const double out = std::strtod(value.c_str(), &end);
  if (value.empty() || end != value.c_str() + value.size() || !(out > 0 && out <= 1))
    Fail(flag, " expects a number in (0, 1], got '", value, "'");
  return out;
}

}  // namespace

void SpeculativeConfig::Validate() const {
  if (!enabled()) {
    if (accept_all_for_benchmark) Fail("--speculative-accept-all-for-benchmark needs --speculative-algorithm");
    return;
  }
  if (algorithm != "NEXTN" && algorithm != "EAGLE")
    Fail("--speculative-algorithm ", algorithm,
         ": Fission drafts with the model's own NextN (MTP) layer: NEXTN or EAGLE (EAGLE3, STANDALONE and NGRAM "
         "have not landed)");
  if (num_steps < 0 || num_steps > 16) Fail("--speculative-num-steps must be in [1, 16], got ", num_steps);
  if (eagle_topk != 0 && eagle_topk != 1)
    Fail("--speculative-eagle-topk ", eagle_topk, ": only 1 (chained drafts); tree drafts have not landed");
  if (num_draft_tokens != 0 && num_draft_tokens != drafts() + 1)
    Fail("--speculative-num-draft-tokens ", num_draft_tokens, ": with --speculative-eagle-topk 1 it must be ",
         "--speculative-num-steps + 1 = ", drafts() + 1);
}

void EngineConfig::Validate() const {
  if (page_size < 1 || page_size > 4096) Fail("--page-size must be in [1, 4096], got ", page_size);
  if (kv_cache_bytes < 0) Fail("the KV cache byte budget must be >= 0, got ", kv_cache_bytes);
  if (max_total_tokens < 0 || (max_total_tokens > 0 && max_total_tokens < page_size))
    Fail("--max-total-tokens must be >= --page-size (", page_size, "), got ", max_total_tokens);
  if (mem_fraction_static < 0 || mem_fraction_static > 1)
    Fail("--mem-fraction-static must be in (0, 1], got ", mem_fraction_static);
  if (max_prefill_tokens < 1) Fail("--max-prefill-tokens must be >= 1, got ", max_prefill_tokens);
  if (max_running_requests < 1) Fail("--max-running-requests must be >= 1, got ", max_running_requests);
  if (context_length < 0) Fail("--context-length must be >= 0 (0: the model's), got ", context_length);
  speculative.Validate();
  ValidateLoadBalanceMethod(load_balance_method);
}

bool ParseEngineFlag(const std::vector<std::string>& args, std::size_t* i, EngineConfig* config) {
  std::string flag = args[*i];
  std::string value;
  bool inline_value = false;
  if (const std::size_t eq = flag.find('='); eq != std::string::npos && flag.rfind("--", 0) == 0) {
    value = flag.substr(eq + 1);
    flag.resize(eq);
    inline_value = true;
  }
  auto take = [&]() -> const std::string& {
    if (!inline_value) {
      if (*i + 1 >= args.size()) Fail(flag, " needs a value");
      value = args[++*i];
    }
    return value;
  };
  if (flag == "--disable-radix-cache") {
    if (inline_value) Fail(flag, " takes no value");
    config->disable_radix_cache = true;
  } else if (flag == "--speculative-algorithm") {
    config->speculative.algorithm = take();
  } else if (flag == "--speculative-num-steps") {
    config->speculative.num_steps = ParseInteger<std::int32_t>(flag, take());
  } else if (flag == "--speculative-eagle-topk") {
    config->speculative.eagle_topk = ParseInteger<std::int32_t>(flag, take());
  } else if (flag == "--speculative-accept-all-for-benchmark") {
    if (inline_value) Fail(flag, " takes no value");
    config->speculative.accept_all_for_benchmark = true;
  } else if (flag == "--speculative-num-draft-tokens") {
    config->speculative.num_draft_tokens = ParseInteger<std::int32_t>(flag, take());
  } else if (flag == "--page-size") {
    config->page_size = ParseInteger<std::int32_t>(flag, take());
  } else if (flag == "--max-total-tokens") {
    config->max_total_tokens = ParseInteger<std::int64_t>(flag, take());
  } else if (flag == "--mem-fraction-static") {
    config->mem_fraction_static = ParseFraction(flag, take());
  } else if (flag == "--chunked-prefill-size") {
    config->chunked_prefill_size = ParseInteger<std::int32_t>(flag, take());
  } else if (flag == "--max-prefill-tokens") {
    config->max_prefill_tokens = ParseInteger<std::int32_t>(flag, take());
  } else if (flag == "--max-running-requests") {
    config->max_running_requests = ParseInteger<std::int32_t>(flag, take());
  } else if (flag == "--random-seed") {
    config->random_seed = ParseInteger<std::uint64_t>(flag, take());
  } else if (flag == "--load-balance-method") {
    config->load_balance_method = take();
    ValidateLoadBalanceMethod(config->load_balance_method);
  } else if (flag == "--context-length") {
    config->context_length = ParseInteger<std::int32_t>(flag, take());
  } else {
    return false;
  }
  ++*i;
  return true;
}

std::string EngineFlagsHelp() {
  return "  --page-size N             tokens per KV cache page (default 16)\n"
         "  --max-total-tokens N      KV cache capacity in tokens (default 16384 on the CPU; on a GPU\n"
         "                            what --mem-fraction-static leaves, capped by this when given)\n"
         "  --mem-fraction-static F   share of GPU memory for weights and KV cache (default 0.85)\n"
         "  --chunked-prefill-size N  prompt tokens per step; longer prompts run in chunks; -1: whole prompts (default 8192)\n"
         "  --max-prefill-tokens N    prompt tokens per step over all requests (default 16384)\n"
         "  --max-running-requests N  sequences decoding at once (default 256)\n"
         "  --disable-radix-cache     turn the prefix cache off\n"
         "  --random-seed N           seed for requests without one (default 0)\n"
         "  --load-balance-method M   round_robin | shortest_queue: requests over DP attention groups\n"
         "                            (default round_robin)\n"
         "  --context-length N        longest sequence (default: the model's)\n"
         "  --speculative-algorithm A NEXTN | EAGLE: speculative decoding with the model's NextN draft layer\n"
         "  --speculative-num-steps N drafts per sequence and step (default 3)\n"
         "  --speculative-eagle-topk N only 1 (chained drafts)\n"
         "  --speculative-num-draft-tokens N  tokens per verify run: steps + 1 (default)\n"
         "  --speculative-accept-all-for-benchmark  accept every draft: outputs are NOT the model's\n"
         "                            (benchmarks on dummy weights only)\n";
}

}  // namespace fission::engine
