// Structured outputs in the engine itself on the tool-trained demo model: schema-constrained
// requests give the same tokens whether or not a tiny KV cache preempts and recomputes them, and
// every answer parses and validates.
#include <gtest/gtest.h>

#include <map>

#include "engine/engine.h"
#include "io/generation_config.h"
#include "model/runtime/model_loader.h"
#include "server/json_schema_check_testlib.h"
#include "server/structured_output.h"
#include "server/tokenizer_detokenizer.h"

namespace fission::server {
namespace {

const char* kSchema = R"({"type": "object", "properties": {
  "name": {"type": "string", "maxLength": 8}, "color": {"enum": ["red", "green", "blue"]},
  "scores": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9}, "minItems": 1, "maxItems": 3}},
  "required": ["name", "color", "scores"], "additionalProperties": false})";

struct Output {
  std::vector<std::int32_t> tokens;
  std::string text;
  engine::FinishReason finish = engine::FinishReason::kNone;
};

class ConstrainedModelEngine : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string dir = std::string(FISSION_SOURCE_DIR) + "/tests/fixtures/models/demo-tools";
    tokenizer_ = tokenizer::Tokenizer::Load(dir).release();
    model_ = model::LoadCausalLM(dir).release();
    eos_ = io::ReadEosTokenIds(dir);
    structured_ = new StructuredOutputs(*tokenizer_, model_->vocab_size());
  }

  // Eight constrained requests at once; `kv_tokens` sizes the cache.
  std::vector<Output> Run(std::int64_t kv_tokens, std::int64_t* preemptions) {
    engine::EngineConfig config;
    config.eos_token_ids = eos_;
    config.max_total_tokens = kv_tokens;
    TokenizerDetokenizer detok(*tokenizer_);
    engine::Engine engine(model_, config, &detok);
    const auto constraint = structured_->Constraint({"json_schema", kSchema, "json_schema", ""});
    std::vector<Output> outputs(8);
    for (int i = 0; i < 8; ++i) {
      engine::SamplingParams p;
      p.temperature = i % 2 == 0 ? 0.0 : 0.9;
      p.seed = static_cast<std::uint64_t>(i);
      p.max_new_tokens = 200;
      p.constraint = constraint;
      const auto prompt = tokenizer_->Encode(StrCat("Describe person ", i, " as JSON:\n"), true);
      engine.Submit({prompt, p, [&outputs, i](const engine::RequestOutput& out) {
                       outputs[i].tokens.insert(outputs[i].tokens.end(), out.token_ids.begin(), out.token_ids.end());
                       outputs[i].text += out.text;
                       if (out.finished) outputs[i].finish = out.finish_reason;
                     }});
    }
    while (engine.HasWork()) {
      engine.Step();
      EXPECT_EQ(engine.CheckPageAccounting(), "");
    }
    *preemptions = engine.stats().preemptions;
    return outputs;
  }

  static tokenizer::Tokenizer* tokenizer_;
  static model::CausalLM* model_;
  static std::vector<std::int32_t> eos_;
  static StructuredOutputs* structured_;
};
tokenizer::Tokenizer* ConstrainedModelEngine::tokenizer_ = nullptr;
model::CausalLM* ConstrainedModelEngine::model_ = nullptr;
std::vector<std::int32_t> ConstrainedModelEngine::eos_;
StructuredOutputs* ConstrainedModelEngine::structured_ = nullptr;

TEST_F(ConstrainedModelEngine, PreemptionChangesNoTokenAndEveryAnswerValidates) {
  std::int64_t roomy_preemptions = 0, tight_preemptions = 0;
  const std::vector<Output> roomy = Run(16384, &roomy_preemptions);
  const std::vector<Output> tight = Run(240, &tight_preemptions);
  EXPECT_EQ(roomy_preemptions, 0);
  EXPECT_GT(tight_preemptions, 0) << "the small cache must preempt";
  const Json schema = Json::parse(kSchema);
  for (std::size_t i = 0; i < roomy.size(); ++i) {
    EXPECT_EQ(tight[i].tokens, roomy[i].tokens) << "request " << i;
    EXPECT_EQ(roomy[i].finish, engine::FinishReason::kStop) << roomy[i].text;
    EXPECT_EQ(testing::SchemaViolation(Json::parse(roomy[i].text), schema), "") << roomy[i].text;
  }
}

}  // namespace
}  // namespace fission::server
