// What structured outputs add to a decode step on the demo model, on the CPU or a GPU (not a test).
//
// The same batch runs twice through the engine on tests/fixtures/models/demo-tools: N prompts
// constrained by a nested JSON schema (compiled by server::StructuredOutputs, as `fission serve`
// does), then unconstrained with each request's max_new_tokens set to what its constrained run
// produced and EOS ignored, so both runs decode the same tokens in the same batch shapes. Each
// decode-only step is timed; the engine's own count of mask time gives the mask share.
//   structured_decode_bench [--requests N] [--repeat R] [--device cpu|cuda]
// The fixture is read under $FISSION_SOURCE_DIR when set (a device host's checkout), else the
// source tree this was built from.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "io/generation_config.h"
#include "model/runtime/model_loader.h"
#include "server/structured_output.h"
#include "server/tokenizer_detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace fission;
using Clock = std::chrono::steady_clock;

const char* kSchema = R"({"type": "object", "properties": {
  "name": {"type": "string", "minLength": 1, "maxLength": 12},
  "age": {"type": "integer", "minimum": 0, "maximum": 120},
  "color": {"enum": ["red", "green", "blue"]},
  "address": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 16},
              "zip": {"type": "string", "pattern": "^[0-9]{5}$"}}, "required": ["city"]},
  "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 3},
  "scores": {"type": "array", "items": {"type": "integer", "minimum": -5, "maximum": 5}, "minItems": 1, "maxItems": 4},
  "active": {"type": "boolean"}},
  "required": ["name", "age", "color", "address", "scores"], "additionalProperties": false})";

struct Run {
  std::vector<double> decode_step_us;  // decode-only steps
  double mask_seconds = 0;
  std::int64_t masks = 0;
  std::vector<std::int32_t> lengths;   // tokens each request produced
};

Run RunBatch(model::CausalLM* model, const engine::EngineConfig& config, const engine::Detokenizer* detok,
             const std::vector<std::vector<std::int32_t>>& prompts, const std::vector<engine::SamplingParams>& params) {
  engine::Engine engine(model, config, detok);
  Run run;
  run.lengths.assign(prompts.size(), 0);
  for (std::size_t i = 0; i < prompts.size(); ++i)
    engine.Submit({prompts[i], params[i], [&run, i](const engine::RequestOutput& out) {
                     run.lengths[i] += static_cast<std::int32_t>(out.token_ids.size());
                   }});
  while (engine.HasWork()) {
    const engine::EngineStats before = engine.stats();
    const auto start = Clock::now();
    engine.Step();
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    const engine::EngineStats after = engine.stats();
    if (after.decode_seconds > before.decode_seconds) run.decode_step_us.push_back(us);
  }
  run.mask_seconds = engine.stats().mask_seconds;
  run.masks = engine.stats().masks;
  return run;
}

double Mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int requests = 16, repeat = 3;
  model::LoadOptions options;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--requests") == 0) requests = std::atoi(argv[++i]);
    if (std::strcmp(argv[i], "--repeat") == 0) repeat = std::atoi(argv[++i]);
    if (std::strcmp(argv[i], "--device") == 0) options.device = argv[++i];
  }
  const char* root = std::getenv("FISSION_SOURCE_DIR");
  const std::string dir = std::string(root != nullptr ? root : FISSION_SOURCE_DIR) + "/tests/fixtures/models/demo-tools";
  const auto tokenizer = tokenizer::Tokenizer::Load(dir);
  const auto model = model::LoadCausalLM(dir, options);
  engine::EngineConfig config;
  config.eos_token_ids = io::ReadEosTokenIds(dir);
  // Each run makes an engine over the same model: a fixed KV budget, so that on a GPU the second
  // does not size its pool from the memory the first one's still holds.
  config.kv_cache_bytes = std::int64_t{256} << 20;
  server::TokenizerDetokenizer detok(*tokenizer);
  server::StructuredOutputs structured(*tokenizer, model->vocab_size());
  const auto constraint = structured.Constraint({"json_schema", kSchema, "json_schema", ""});

  std::vector<std::vector<std::int32_t>> prompts;
  for (int i = 0; i < requests; ++i)
    prompts.push_back(tokenizer->Encode(StrCat("Describe person ", i, " as JSON:\n"), true));
  std::printf("demo-tools on %s, %d requests decoding together, %d repeats\n", options.device.c_str(), requests, repeat);
  std::printf("%-7s %-14s %-14s %-14s %-16s %-12s\n", "repeat", "constrained", "plain", "difference", "mask per step",
              "mask per token");
  for (int r = 0; r < repeat; ++r) {
    std::vector<engine::SamplingParams> constrained(requests);
    for (int i = 0; i < requests; ++i) {
      constrained[i].temperature = 0.8;
      constrained[i].seed = static_cast<std::uint64_t>(100 * r + i);
      constrained[i].max_new_tokens = 1500;
      constrained[i].constraint = constraint;
    }
    const Run c = RunBatch(model.get(), config, &detok, prompts, constrained);
    std::vector<engine::SamplingParams> plain = constrained;
    for (int i = 0; i < requests; ++i) {
      plain[i].constraint = nullptr;
      plain[i].ignore_eos = true;
      plain[i].max_new_tokens = std::max(c.lengths[i], 1);
    }
    const Run p = RunBatch(model.get(), config, &detok, prompts, plain);
    const double mask_step_us = c.mask_seconds * 1e6 / std::max<std::size_t>(c.decode_step_us.size(), 1);
    std::printf("%-7d %8.0f us p50 %8.0f us p50 %+8.0f us    %8.1f us      %6.2f us   (%zu vs %zu decode steps, %lld masks)\n",
                r, Median(c.decode_step_us), Median(p.decode_step_us), Mean(c.decode_step_us) - Mean(p.decode_step_us),
                mask_step_us, c.mask_seconds * 1e6 / std::max<std::int64_t>(c.masks, 1), c.decode_step_us.size(),
                p.decode_step_us.size(), static_cast<long long>(c.masks));
  }
  return 0;
}
