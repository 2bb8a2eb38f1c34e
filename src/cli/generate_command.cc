// `fission generate`: offline inference.
//   fission generate --model-path DIR --prompt-ids 1,2,3 --max-new-tokens N
//     prints the generated ids (greedy unless sampling flags say otherwise), comma-separated.
//   fission generate --model-path DIR --input FILE.jsonl
//     runs every line (input_ids or text, optional sampling_params) and prints one JSON line per
//     completion (with its text when a tokenizer is found: --tokenizer-path, else the model
//     directory's tokenizer.json). The throughput summary (prefill and decode split) goes to stderr.
//   fission generate ... --nnodes N --node-rank R --dist-init-addr HOST:PORT
//     one of N processes sharing the --tp-size ranks: node 0 runs the prompts and prints; the
//     others (R > 0) run their ranks for node 0's steps and exit 0 when it finishes
//     (docs/multinode.md).
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/mapped_file.h"
#include "cli/commands.h"
#include "engine/engine.h"
#include "model/runtime/load_flags.h"
#include "engine/offline.h"
#include "io/generation_config.h"
#include "server/generate_io.h"
#include "model/runtime/parallel_model.h"
#include "model/runtime/model_loader.h"
#include "server/tokenizer_detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace fission::cli {
namespace {

void PrintHelp() {
  std::printf(
      "usage: fission generate --model-path DIR (--prompt-ids 1,2,3 | --input FILE.jsonl) [options]\n\n"
      "  --model-path DIR          checkpoint directory (config.json, *.safetensors)\n"
      "  --prompt-ids IDS          one prompt as comma-separated token ids; prints the output ids\n"
      "  --input FILE              JSON lines: {\"input_ids\": [...] | \"text\": \"...\", \"sampling_params\": {...}}\n"
      "  --tokenizer-path DIR      tokenizer.json for text prompts, output text and stop strings\n"
      "                            (default: the model directory, when it has one)\n"
      "  --warmup                  run the first prompt once (one new token) before the timed run, so the\n"
      "                            summary leaves out first-use costs (GEMM heuristics, allocations)\n"
      "model:\n%s"
      "sampling defaults (a line's sampling_params override them):\n"
      "  --max-new-tokens N        (default 16)\n"
      "  --temperature T           (default 0: greedy)\n"
      "  --top-p P  --top-k K  --min-p P  --seed S  --ignore-eos\n"
      "engine:\n%s",
      model::LoadFlagsHelp().c_str(), engine::EngineFlagsHelp().c_str());
}

double ParseDouble(const std::string& flag, const std::string& value) {
  try {
    std::size_t used = 0;
    const double d = std::stod(value, &used);
    if (used == value.size()) return d;
  } catch (const std::exception&) {
  }
  Fail(flag, " expects a number, got '", value, "'");
}

std::int64_t ParseInt(const std::string& flag, const std::string& value) {
  try {
    std::size_t used = 0;
    const long long v = std::stoll(value, &used);
    if (used == value.size()) return v;
  } catch (const std::exception&) {
  }
  Fail(flag, " expects an integer, got '", value, "'");
}

}  // namespace

int RunGenerate(const std::vector<std::string>& args) {
  engine::EngineConfig config;
  model::LoadOptions load;
  std::string model_path, prompt_ids, input, tokenizer_path;
  engine::SamplingParams defaults;
  defaults.temperature = 0.0;
  defaults.max_new_tokens = 16;
  bool warmup = false;
  for (std::size_t i = 0; i < args.size();) {
    const std::string& flag = args[i];
    if (flag == "--help" || flag == "-h") {
      PrintHelp();
      return 0;
    }
    if (engine::ParseEngineFlag(args, &i, &config)) continue;
    if (model::ParseLoadFlag(args, &i, &load)) continue;
    if (flag == "--ignore-eos" || flag == "--warmup") {
      (flag == "--warmup" ? warmup : defaults.ignore_eos) = true;
      ++i;
      continue;
    }
    if (i + 1 >= args.size()) Fail("unknown flag or missing value: ", flag);
    const std::string& value = args[i + 1];
    if (flag == "--model-path") {
      model_path = value;
    } else if (flag == "--prompt-ids") {
      prompt_ids = value;
    } else if (flag == "--input") {
      input = value;
    } else if (flag == "--tokenizer-path") {
      tokenizer_path = value;
    } else if (flag == "--max-new-tokens") {
      defaults.max_new_tokens = static_cast<std::int32_t>(ParseInt(flag, value));
    } else if (flag == "--temperature") {
      defaults.temperature = ParseDouble(flag, value);
    } else if (flag == "--top-p") {
      defaults.top_p = ParseDouble(flag, value);
    } else if (flag == "--top-k") {
      defaults.top_k = static_cast<std::int32_t>(ParseInt(flag, value));
    } else if (flag == "--min-p") {
      defaults.min_p = ParseDouble(flag, value);
    } else if (flag == "--seed") {
      const std::int64_t seed = ParseInt(flag, value);
      if (seed < 0) Fail("--seed must be >= 0, got ", seed);
      defaults.seed = static_cast<std::uint64_t>(seed);
    } else {
      Fail("unknown flag: ", flag, " (see fission generate --help)");
    }
    i += 2;
  }
  if (model_path.empty()) Fail("--model-path is required");
  config.speculative.Validate();
  load.load_draft = config.speculative.enabled();  // speculative decoding needs the draft layer
  // As SGLang: no graph larger than the batch the engine can run.
  if (load.cuda_graphs.max_batch_size == 0) load.cuda_graphs.max_batch_size = config.max_running_requests;
  if (load.nodes.node_rank > 0) {
    // A follower node: no prompts, no engine; it runs node 0's steps on its ranks.
    model::ValidateLoadOptions(load);
    std::unique_ptr<model::CausalLM> model = model::LoadCausalLM(model_path, load);
    model::RunFollower(*model);
    return 0;
  }
  if (prompt_ids.empty() == input.empty()) Fail("give exactly one of --prompt-ids and --input");
  config.Validate();

  // A tokenizer, when there is one: text prompts in, text and stop strings out.
  if (tokenizer_path.empty() && std::filesystem::exists(model_path + "/tokenizer.json")) tokenizer_path = model_path;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;
  std::unique_ptr<server::TokenizerDetokenizer> detokenizer;
  server::TextEncoder encode;
  if (!tokenizer_path.empty()) {
    tokenizer = tokenizer::Tokenizer::Load(tokenizer_path);
    detokenizer = std::make_unique<server::TokenizerDetokenizer>(*tokenizer);
    encode = [&tokenizer](const std::string& text) { return tokenizer->Encode(text, /*add_special_tokens=*/true); };
  }

  std::vector<engine::OfflinePrompt> prompts;
  if (!prompt_ids.empty()) {
    prompts.push_back({server::ParseIdList(prompt_ids, "--prompt-ids"), defaults});
  } else {
    prompts = server::ParsePromptsJsonl(ReadFile(input), input, defaults, encode);
    if (prompts.empty()) Fail(input, ": no prompts");
  }

  std::unique_ptr<model::CausalLM> model = model::LoadCausalLM(model_path, load);
  config.eos_token_ids = io::ReadEosTokenIds(model_path);
  engine::Engine engine(model.get(), config, detokenizer.get());
  if (warmup) {  // the report counts only the timed run's steps (RunOffline)
    engine::OfflinePrompt first = prompts.front();
    first.params.max_new_tokens = 1;
    first.params.n = 1;
    engine::RunOffline(engine, {first});
    engine.RequestFlushCache();  // the timed prompts must not hit the warm-up's cached pages
  }
  const engine::OfflineReport report = engine::RunOffline(engine, prompts);

  if (!prompt_ids.empty()) {
    const engine::OfflineCompletion& c = report.outputs[0][0];
    if (c.finish_reason == engine::FinishReason::kAbort) Fail("generation failed: ", c.error);
    std::string line;
    for (std::size_t i = 0; i < c.token_ids.size(); ++i) line += (i ? "," : "") + std::to_string(c.token_ids[i]);
    std::printf("%s\n", line.c_str());
  } else {
    for (std::size_t i = 0; i < report.outputs.size(); ++i)
      for (std::size_t j = 0; j < report.outputs[i].size(); ++j)
        std::printf("%s\n", server::CompletionJson(i, j, report.outputs[i][j], /*with_text=*/detokenizer != nullptr).c_str());
  }
  std::fflush(stdout);
  std::fprintf(stderr, "%s", engine::ThroughputSummary(report).c_str());
  return 0;
}

FISSION_COMMAND("generate", "offline inference from the command line or a JSON-lines file", RunGenerate);

}  // namespace fission::cli
