#include "server/server_args.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <set>

#include "base/error.h"
#include "model/runtime/load_flags.h"
#include "server/reasoning_parser.h"
#include "server/tool_call_parser.h"

namespace fission::server {
namespace {

using K = FlagKind;
using P = FlagParser;
using T = FlagType;

}  // namespace

const std::vector<FlagInfo>& ServerFlags() {
  static const std::vector<FlagInfo> flags = {
      // Model and tokenizer.
      {"--model-path", {"--model"}, T::kString, K::kApplied, P::kServer, "PATH", "",
       "checkpoint directory (config.json, safetensors, tokenizer); required"},
      {"--tokenizer-path", {}, T::kString, K::kApplied, P::kServer, "PATH", "the model path",
       "directory holding tokenizer.json"},
      {"--served-model-name", {}, T::kString, K::kApplied, P::kServer, "NAME", "the model path",
       "model name reported by /v1/models and expected in requests"},
      {"--chat-template", {}, T::kString, K::kApplied, P::kServer, "FILE", "the tokenizer's",
       "Jinja chat template file overriding the tokenizer's"},
      {"--load-format", {}, T::kString, K::kApplied, P::kLoad, "F", "auto",
       "auto | safetensors | dummy (random weights from config.json)"},
      {"--json-model-override-args", {}, T::kString, K::kApplied, P::kLoad, "JSON", "{}",
       "JSON object merged over config.json"},
      {"--dtype", {}, T::kString, K::kNotLanded, P::kServer, "T", "auto",
       "auto | bfloat16; float16/half and float32/float have not landed"},
      {"--quantization", {}, T::kString, K::kApplied, P::kLoad, "Q", "the checkpoint's",
       "fp8: block-scaled FP8, the checkpoint's or per_block128_fp8 online on a bf16 one; others have not landed"},
      {"--trust-remote-code", {}, T::kBool, K::kIgnored, P::kServer, "", "", "no Python code is run"},
      {"--model-loader-extra-config", {}, T::kString, K::kApplied, P::kLoad, "JSON", "{}",
       "online_quant_config: ATOM's online quantization per module; other keys are ignored"},
      {"--tokenizer-mode", {}, T::kString, K::kIgnored, P::kServer, "M", "auto", "one tokenizer implementation"},
      {"--revision", {}, T::kString, K::kIgnored, P::kServer, "R", "", "checkpoints are local directories"},
      // HTTP server.
      {"--host", {}, T::kString, K::kApplied, P::kServer, "ADDR", "127.0.0.1", "address to listen on"},
      {"--port", {}, T::kInt, K::kApplied, P::kServer, "N", "30000", "port to listen on"},
      {"--api-key", {}, T::kString, K::kApplied, P::kServer, "KEY", "none",
       "require `Authorization: Bearer KEY` (health routes stay open)"},
      {"--reasoning-parser", {}, T::kString, K::kApplied, P::kServer, "NAME", "none",
       "deepseek-r1 | deepseek-v3 | deepseek-v4 | glm45 | qwen3: thinking text goes to reasoning_content"},
      {"--tool-call-parser", {}, T::kString, K::kApplied, P::kServer, "NAME", "none",
       "deepseekv3 | deepseekv31 | deepseekv32 | deepseekv4 | glm45 | glm47 | qwen: tool-call markup becomes "
       "tool_calls"},
      {"--grammar-backend", {}, T::kString, K::kApplied, P::kServer, "B", "xgrammar",
       "xgrammar | outlines | llguidance: structured outputs by Fission's own grammar engine; none: off"},
      {"--log-level", {}, T::kString, K::kApplied, P::kServer, "L", "info", "debug | info | warning | error | critical"},
      {"--graceful-shutdown-timeout", {}, T::kFloat, K::kApplied, P::kServer, "S", "30",
       "on SIGTERM, seconds requests in flight may take to finish before they are cancelled"},
      {"--enable-metrics", {}, T::kBool, K::kIgnored, P::kServer, "", "", "/metrics is always served"},
      {"--log-requests", {}, T::kBool, K::kIgnored, P::kServer, "", "", "request logging follows --log-level"},
      {"--stream-interval", {}, T::kInt, K::kIgnored, P::kServer, "N", "1", "every token is streamed"},
      {"--enable-cache-report", {}, T::kBool, K::kIgnored, P::kServer, "", "", ""},
      {"--skip-server-warmup", {}, T::kBool, K::kIgnored, P::kServer, "", "", "there is no warm-up request"},
      {"--watchdog-timeout", {}, T::kFloat, K::kIgnored, P::kServer, "S", "300", ""},
      {"--decode-log-interval", {}, T::kInt, K::kIgnored, P::kServer, "N", "40", ""},
      // Device and parallel layout.
      {"--device", {}, T::kString, K::kApplied, P::kServer, "D", "auto", "cpu | cuda | cuda:N (auto: cuda when available)"},
      {"--tp-size", {"--tensor-parallel-size", "--tp"}, T::kInt, K::kApplied, P::kLoad, "N", "1",
       "ranks sharing the model (threads on the CPU)"},
      {"--attn-cp-size", {}, T::kInt, K::kApplied, P::kLoad, "C", "1",
       "prefill context-parallel groups; C divides the tp size"},
      {"--enable-nsa-prefill-context-parallel", {}, T::kBool, K::kApplied, P::kLoad, "", "",
       "accepted; context parallelism follows --attn-cp-size"},
      {"--nsa-prefill-cp-mode", {}, T::kString, K::kApplied, P::kLoad, "M", "round-robin-split",
       "round-robin-split (the only mode)"},
      {"--dp-size", {"--data-parallel-size", "--dp"}, T::kInt, K::kApplied, P::kLoad, "N", "1",
       "data-parallel attention groups (with --enable-dp-attention); D times the cp size divides the tp size"},
      {"--enable-dp-attention", {}, T::kBool, K::kApplied, P::kLoad, "", "",
       "each of --dp-size groups of tp / dp ranks runs its own batch and KV pool; tokens meet for the MoE"},
      {"--ep-size", {"--expert-parallel-size", "--ep"}, T::kInt, K::kApplied, P::kLoad, "N", "1",
       "routed experts split over N groups of tp / N ranks, tokens dispatched by all-to-all"},
      {"--load-balance-method", {}, T::kString, K::kApplied, P::kEngine, "M", "round_robin",
       "round_robin | shortest_queue: how requests are placed in DP attention groups"},
      {"--nnodes", {}, T::kInt, K::kApplied, P::kLoad, "N", "1",
       "processes sharing the --tp-size ranks evenly (docs/multinode.md)"},
      {"--node-rank", {}, T::kInt, K::kApplied, P::kLoad, "R", "0",
       "this process's node: 0 serves HTTP and runs the engine, the others follow it"},
      {"--dist-init-addr", {"--nccl-init-addr"}, T::kString, K::kApplied, P::kLoad, "HOST:PORT", "",
       "where node 0 listens for the other nodes (needed with --nnodes > 1)"},
      {"--dist-timeout", {}, T::kInt, K::kApplied, P::kLoad, "S", "300",
       "seconds node 0 waits for the other nodes and they retry connecting"},
      {"--pcp-min-tokens", {}, T::kInt, K::kApplied, P::kLoad, "N", "512",
       "split prefill steps of at least N tokens over the context-parallel group (Fission's own)"},
      {"--attention-backend", {}, T::kString, K::kIgnored, P::kServer, "B", "",
       "each backend has one attention implementation"},
      {"--moe-runner-backend", {}, T::kString, K::kIgnored, P::kServer, "B", "auto", ""},
      {"--moe-a2a-backend", {}, T::kString, K::kIgnored, P::kServer, "B", "none", ""},
      {"--deepep-mode", {}, T::kString, K::kIgnored, P::kServer, "M", "auto", ""},
      {"--disable-shared-experts-fusion", {}, T::kBool, K::kIgnored, P::kServer, "", "", ""},
      {"--enable-torch-compile", {}, T::kBool, K::kIgnored, P::kServer, "", "", "there is no torch"},
      {"--disable-overlap-schedule", {}, T::kBool, K::kIgnored, P::kServer, "", "", ""},
      {"--enable-mixed-chunk", {}, T::kBool, K::kIgnored, P::kServer, "", "",
       "prefill chunks and decode tokens always share steps"},
      {"--schedule-policy", {}, T::kString, K::kIgnored, P::kServer, "P", "fcfs", "the scheduler is FCFS"},
      {"--cuda-graph-bs", {}, T::kIntList, K::kApplied, P::kServer, "N...", "1 2 4 8 12 16 24 32 40 ... max",
       "decode (and speculative verify and draft) batch sizes captured as CUDA graphs (a batch runs on the "
       "smallest size that holds it)"},
      {"--cuda-graph-max-bs", {}, T::kInt, K::kApplied, P::kServer, "N", "256",
       "the largest default CUDA graph batch size"},
      {"--disable-cuda-graph", {}, T::kBool, K::kApplied, P::kServer, "", "", "run decode steps eagerly"},
      // Memory and scheduling.
      {"--mem-fraction-static", {}, T::kFloat, K::kApplied, P::kEngine, "F", "0.85",
       "share of GPU memory for weights and KV cache, in (0, 1]"},
      {"--max-total-tokens", {}, T::kInt, K::kApplied, P::kEngine, "N", "16384 on CPU",
       "KV cache capacity in tokens (on a GPU: a cap on what --mem-fraction-static leaves)"},
      {"--page-size", {}, T::kInt, K::kApplied, P::kEngine, "N", "16", "tokens per KV cache page"},
      {"--chunked-prefill-size", {}, T::kInt, K::kApplied, P::kEngine, "N", "8192",
       "prompt tokens per step for one request; -1 disables chunking"},
      {"--max-prefill-tokens", {}, T::kInt, K::kApplied, P::kEngine, "N", "16384",
       "prompt tokens per step over all requests"},
      {"--max-running-requests", {}, T::kInt, K::kApplied, P::kEngine, "N", "256", "sequences decoding at once"},
      {"--disable-radix-cache", {}, T::kBool, K::kApplied, P::kEngine, "", "", "turn the prefix cache off"},
      {"--context-length", {}, T::kInt, K::kApplied, P::kEngine, "N", "the model's", "longest sequence"},
      {"--random-seed", {}, T::kInt, K::kApplied, P::kEngine, "N", "0", "seed for requests without one"},
      {"--kv-cache-dtype", {}, T::kString, K::kApplied, P::kServer, "T", "auto",
       "auto | bf16 | bfloat16 | fp8_e4m3 (MLA latent rows as e4m3 codes with scales); fp8_e5m2, fp4_e2m1 have not landed"},
      {"--swa-full-tokens-ratio", {}, T::kFloat, K::kIgnored, P::kServer, "F", "0.8",
       "there is no separate sliding-window pool"},
      // Speculative decoding.
      {"--speculative-algorithm", {}, T::kString, K::kApplied, P::kEngine, "A", "none",
       "NEXTN | EAGLE: speculative decoding with the model's own NextN (MTP) layer, chained drafts; EAGLE3, "
       "STANDALONE and NGRAM have not landed"},
      {"--speculative-num-steps", {}, T::kInt, K::kApplied, P::kEngine, "N", "3", "drafts per sequence and step"},
      {"--speculative-eagle-topk", {}, T::kInt, K::kApplied, P::kEngine, "N", "1",
       "only 1 (tree drafts have not landed)"},
      {"--speculative-num-draft-tokens", {}, T::kInt, K::kApplied, P::kEngine, "N", "steps + 1",
       "tokens per verify run: --speculative-num-steps + 1"},
      {"--speculative-accept-all-for-benchmark", {}, T::kBool, K::kApplied, P::kEngine, "", "",
       "accept every draft: outputs are NOT the model's (timing on dummy weights only)"},
      {"--speculative-draft-model-path", {}, T::kString, K::kApplied, P::kLoad, "PATH", "the target's own layer",
       "a NextN checkpoint (SGLang's export layout); without it the target checkpoint's extra layer"},
  };
  return flags;
}

const char* FlagKindName(FlagKind kind) {
  switch (kind) {
    case FlagKind::kApplied:
      return "applied";
    case FlagKind::kIgnored:
      return "ignored";
    case FlagKind::kNotLanded:
      return "not landed";
  }
  return "?";
}

namespace {

const FlagInfo* FindFlag(std::string_view name) {
  for (const FlagInfo& f : ServerFlags()) {
    if (f.name == name) return &f;
    for (std::string_view a : f.aliases)
      if (a == name) return &f;
  }
  return nullptr;
}

// argparse accepts an unambiguous prefix of a long flag (SGLang's documented `--tp 2` relies on
// it); so does Fission. An ambiguous prefix is an Error listing the candidates.
const FlagInfo* FindByPrefix(std::string_view name) {
  const FlagInfo* found = nullptr;
  bool ambiguous = false;
  std::string candidates;
  for (const FlagInfo& f : ServerFlags()) {
    bool match = f.name.substr(0, name.size()) == name;
    for (std::string_view a : f.aliases) match = match || a.substr(0, name.size()) == name;
    if (!match) continue;
    candidates += StrCat(candidates.empty() ? "" : ", ", f.name);
    if (found != nullptr) ambiguous = true;
    found = &f;
  }
  if (ambiguous) Fail("ambiguous flag '", name, "' (could be ", candidates, ")");
  return found;
}

std::size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

std::string_view ClosestFlag(std::string_view name) {
  std::string_view best;
  std::size_t best_distance = ~std::size_t{0};
  auto consider = [&](std::string_view candidate) {
    std::size_t d = EditDistance(name, candidate);
    // A flag that merely extends what was typed is the likeliest intent.
    if (candidate.substr(0, name.size()) == name) d = std::min<std::size_t>(d, 1);
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  };
  for (const FlagInfo& f : ServerFlags()) {
    consider(f.name);
    for (std::string_view a : f.aliases) consider(a);
  }
  return best;
}

long long ParseIntValue(std::string_view flag, const std::string& value) {
  long long out = 0;
  const char* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, out);
  if (value.empty() || ec != std::errc() || ptr != end) Fail(flag, " expects an integer, got '", value, "'");
  if (out < -(1LL << 31) || out > (1LL << 31) - 1) Fail(flag, " value ", value, " is out of range");
  return out;
}

double ParseFloatValue(std::string_view flag, const std::string& value) {
  char* end = nullptr;
  errno = 0;
  const double out = value.empty() ? 0 : std::strtod(value.c_str(), &end);
  if (value.empty() || end != value.c_str() + value.size() || errno != 0 || out != out)
    Fail(flag, " expects a number, got '", value, "'");
  return out;
}

void RequireChoice(std::string_view flag, const std::string& value, std::initializer_list<std::string_view> choices) {
  std::string list;
  for (std::string_view c : choices) {
    if (c == value) return;
    if (!list.empty()) list += ", ";
    list += c;
  }
  Fail(flag, " '", value, "' is not one of: ", list);
}

// Applies a flag this file parses. `values` holds one value, several for an int list, none for a bool.
void Apply(const FlagInfo& f, const std::vector<std::string>& values, ServerArgs* out) {
  const std::string_view n = f.name;
  const std::string v = values.empty() ? "" : values[0];
  // Type check first, so that even ignored flags reject malformed values.
  long long i = 0;
  if (f.type == T::kInt) i = ParseIntValue(n, v);
  if (f.type == T::kFloat) ParseFloatValue(n, v);
  if (f.type == T::kString && v.empty() && n != "--api-key") Fail(n, " needs a non-empty value");

  if (n == "--model-path") out->model_path = v;
  if (n == "--tokenizer-path") out->tokenizer_path = v;
  if (n == "--served-model-name") out->served_model_name = v;
  if (n == "--chat-template") out->chat_template = v;
  if (n == "--host") out->host = v;
  if (n == "--api-key") out->api_key = v;
  if (n == "--port") {
    if (i < 0 || i > 65535) Fail("--port must be in [0, 65535] (0: any free port), got ", v);
    out->port = static_cast<int>(i);
  }
  if (n == "--dtype") {
    RequireChoice(n, v, {"auto", "half", "float16", "bfloat16", "float", "float32"});
    out->dtype = v;
  }
  if (n == "--reasoning-parser") out->reasoning_parser = ReasoningParser::Create(v)->name();
  if (n == "--tool-call-parser") out->tool_call_parser = ToolCallParser::Create(v)->name();
  if (n == "--grammar-backend") {
    RequireChoice(n, v, {"xgrammar", "outlines", "llguidance", "none"});
    out->grammar_backend = v;
  }
  if (n == "--log-level") {
    RequireChoice(n, v, {"debug", "info", "warning", "error", "critical"});
    out->log_level = v;
  }
  if (n == "--device") {
    model::ParseDevice(v);  // cpu | cuda | cuda:N | auto
    out->device = v;
  }
  if (n == "--kv-cache-dtype") {
    RequireChoice(n, v, {"auto", "bf16", "bfloat16", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1"});
    out->kv_cache_dtype = v;
  }
  if (n == "--cuda-graph-bs") {
    out->cuda_graph_bs.clear();
    for (const std::string& item : values) {
      const long long bs = ParseIntValue(n, item);
      if (bs < 1) Fail("--cuda-graph-bs sizes must be >= 1, got ", item);
      out->cuda_graph_bs.push_back(static_cast<int>(bs));
    }
  }
  if (n == "--cuda-graph-max-bs") {
    if (i < 1) Fail("--cuda-graph-max-bs must be >= 1, got ", v);
    out->cuda_graph_max_bs = static_cast<int>(i);
  }
  if (n == "--disable-cuda-graph") out->disable_cuda_graph = true;
  if (n == "--graceful-shutdown-timeout") {
    const double seconds = ParseFloatValue(n, v);
    if (!(seconds >= 0 && seconds <= 86400)) Fail("--graceful-shutdown-timeout must be in [0, 86400] seconds, got ", v);
    out->graceful_shutdown_timeout = seconds;
  }
  if (n == "--swa-full-tokens-ratio") {
    const double r = ParseFloatValue(n, v);
    if (!(r > 0 && r <= 1)) Fail("--swa-full-tokens-ratio must be in (0, 1], got ", v);
  }
}

// Values whose feature has not landed, and the cross-flag checks of the engine and the loader:
// each check on its own, so one run reports them all.
void Validate(ServerArgs* out, std::vector<std::string>* problems) {
  auto check = [problems](auto&& f) { CollectProblem(problems, f); };
  // Speculative decoding loads the model's draft layer (its flags are checked with the engine's).
  out->load.load_draft = out->engine.speculative.enabled();
  check([&] {
    const std::string& kv = out->kv_cache_dtype;
    if (kv != "auto" && kv != "bf16" && kv != "bfloat16" && kv != "fp8_e4m3")
      Fail("--kv-cache-dtype ", kv, ": only fp8_e4m3 of the quantized KV caches has landed (use fp8_e4m3, auto or bf16)");
  });
  check([&] {
    if (out->dtype != "auto" && out->dtype != "bfloat16") Fail("--dtype ", out->dtype, ": only auto and bfloat16 have landed");
  });
  check([&] { out->engine.Validate(); });
  check([&] { model::ValidateLoadOptions(out->load); });
}

// One flag at args[*i] (advancing *i past its values) applied to *out.
void ParseOneFlag(const std::vector<std::string>& args, std::size_t* i, ServerArgs* out,
                  std::set<std::string_view>* listed) {
  const std::string& arg = args[*i];
  if (arg.rfind("--", 0) != 0 || arg.size() == 2)
    Fail("unexpected argument '", arg, "': fission serve takes only --flags (see --help)");
  std::string name = arg, value;
  const std::size_t eq = arg.find('=');
  const bool inline_value = eq != std::string::npos;
  if (inline_value) {
    name = arg.substr(0, eq);
    value = arg.substr(eq + 1);
  }
  const FlagInfo* flag = FindFlag(name);
  if (flag == nullptr) flag = FindByPrefix(name);
  if (flag == nullptr) {
    // Skip what looks like its values, so they are not reported as stray arguments too.
    while (*i + 1 < args.size() && args[*i + 1].rfind("--", 0) != 0) ++*i;
    Fail("unknown flag '", name, "' (did you mean ", ClosestFlag(name), "?)");
  }
  std::vector<std::string> values;
  if (flag->type == T::kBool) {
    if (inline_value) Fail(name, " takes no value");
  } else if (inline_value) {
    if (flag->type == T::kIntList) {
      std::size_t from = 0;
      while (from <= value.size()) {
        const std::size_t comma = std::min(value.find(',', from), value.size());
        values.push_back(value.substr(from, comma - from));
        from = comma + 1;
      }
    } else {
      values.push_back(value);
    }
  } else {
    auto is_value = [&](std::size_t j) { return j < args.size() && args[j].rfind("--", 0) != 0; };
    if (!is_value(*i + 1)) Fail(name, " needs a value");
    values.push_back(args[++*i]);
    while (flag->type == T::kIntList && is_value(*i + 1)) values.push_back(args[++*i]);
  }
  if (flag->kind == K::kIgnored && listed->insert(flag->name).second) out->ignored_flags.emplace_back(flag->name);
  if (flag->parser == P::kServer) return Apply(*flag, values, out);
  // Hand the flag, under its canonical name, to the parser that owns it.
  std::vector<std::string> sub = {std::string(flag->name)};
  if (flag->type != T::kBool) sub[0] += StrCat("=", values[0]);
  std::size_t j = 0;
  const bool taken = flag->parser == P::kEngine ? engine::ParseEngineFlag(sub, &j, &out->engine)
                                                : model::ParseLoadFlag(sub, &j, &out->load);
  FISSION_CHECK(taken && j == 1, "flag table and owner parser disagree on ", flag->name);
}

}  // namespace

std::string ServerArgs::IgnoredFlagsLine() const {
  if (ignored_flags.empty()) return "";
  std::string line = "ignored flags (no effect in Fission):";
  for (const std::string& f : ignored_flags) {
    line += ' ';
    line += f;
  }
  return line;
}

ServerArgs ParseServerArgs(const std::vector<std::string>& args, std::vector<std::string>* problems) {
  ServerArgs out;
  std::set<std::string_view> listed;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "-h" || args[i] == "--help") {
      out.help = true;
      continue;
    }
    CollectProblem(problems, [&] { ParseOneFlag(args, &i, &out, &listed); });
  }
  Validate(&out, problems);
  return out;
}

ServerArgs ParseServerArgs(const std::vector<std::string>& args) {
  std::vector<std::string> problems;
  ServerArgs out = ParseServerArgs(args, &problems);
  if (!problems.empty()) Fail(JoinProblems(problems));
  return out;
}

std::string JoinProblems(const std::vector<std::string>& problems) {
  if (problems.size() == 1) return problems[0];
  std::string text = StrCat(problems.size(), " problems:");
  for (const std::string& p : problems) text += StrCat("\n  - ", p);
  return text;
}

std::string ServerArgsHelp() {
  std::string text =
      "Usage: fission serve [--model-path PATH] [flags]\n"
      "Without --model-path the bundled demo model (models/demo-deepseek-v3) is served.\n"
      "OpenAI-compatible server taking sglang.launch_server's flags. Kinds: applied; ignored (accepted,\n"
      "no effect, listed at start-up); not landed (values needing a missing feature are errors).\n\n";
  for (const FlagInfo& f : ServerFlags()) {
    std::string names(f.name);
    for (std::string_view a : f.aliases) names += StrCat(", ", a);
    if (!f.value_name.empty()) names += StrCat(" ", f.value_name);
    text += StrCat("  ", names, "\n      ");
    if (!f.help.empty()) text += StrCat(f.help, ". ");
    if (!f.default_text.empty()) text += StrCat("Default: ", f.default_text, ". ");
    text += StrCat("[", FlagKindName(f.kind), "]\n");
  }
  text += "  -h, --help\n      this text\n";
  return text;
}

}  // namespace fission::server
