#include "model/runtime/draft_source.h"

#include <string>
#include <vector>

#include "base/error.h"
#include "model/layers/nextn_layer.h"
#include "model/registry.h"

namespace fission::model {
namespace {

// The fields a draft layer shares with its target (it reads the target's hidden states and
// embedding, and runs the target's kind of layer).
void CompareConfigs(const io::ModelConfig& target, const io::ModelConfig& draft, std::vector<std::string>* problems) {
  auto same = [&](const char* field, std::int64_t t, std::int64_t d) {
    if (t != d) problems->push_back(StrCat(field, " is ", d, " in the draft and ", t, " in the target"));
  };
  if (draft.model_type != target.model_type)
    problems->push_back(StrCat("model_type is '", draft.model_type, "' in the draft and '", target.model_type,
                               "' in the target"));
  same("hidden_size", target.hidden_size, draft.hidden_size);
  same("vocab_size", target.vocab_size, draft.vocab_size);
  same("num_attention_heads", target.num_attention_heads, draft.num_attention_heads);
  same("q_lora_rank", target.q_lora_rank, draft.q_lora_rank);
  same("kv_lora_rank", target.kv_lora_rank, draft.kv_lora_rank);
  same("qk_nope_head_dim", target.qk_nope_head_dim, draft.qk_nope_head_dim);
  same("qk_rope_head_dim", target.qk_rope_head_dim, draft.qk_rope_head_dim);
  same("v_head_dim", target.v_head_dim, draft.v_head_dim);
  same("n_routed_experts", target.n_routed_experts, draft.n_routed_experts);
  same("n_shared_experts", target.n_shared_experts, draft.n_shared_experts);
  same("moe_intermediate_size", target.moe_intermediate_size, draft.moe_intermediate_size);
  same("num_experts_per_tok", target.num_experts_per_tok, draft.num_experts_per_tok);
}

}  // namespace

DraftSource ResolveDraftSource(const io::ModelConfig& target, const io::Checkpoint* target_checkpoint,
                               const LoadOptions& options) {
  std::vector<std::string> problems;
  if (!HasDraftLayer(target))
    problems.push_back(StrCat("model_type '", target.model_type,
                              "' has no NextN draft layer in Fission yet (it has landed for deepseek_v3 and kimi_k2)"));
  if (options.nodes.nnodes > 1)
    problems.push_back(StrCat("--nnodes ", options.nodes.nnodes, ": draft steps do not reach follower nodes yet"));
  DraftSource source;
  const bool dummy = options.load_format == "dummy";
  const io::Checkpoint* weights = target_checkpoint;
  std::string where = StrCat(target.source);
  if (options.draft_model_path.empty()) {
    source.layer = target.num_hidden_layers;
    if (target.num_nextn_predict_layers < 1)
      problems.push_back(StrCat(target.source,
                                " declares no NextN layer (num_nextn_predict_layers is 0): pass "
                                "--speculative-draft-model-path with a NextN checkpoint"));
  } else {
    io::ModelConfig draft;
    try {
      draft = io::LoadModelConfig(options.draft_model_path);
    } catch (const Error& e) {
      Fail("--speculative-draft-model-path ", options.draft_model_path, ": ", e.what());
    }
    where = draft.source;
    // SGLang's rule: an export of one layer names it 0, an older one keeps its original index.
    source.layer = draft.num_hidden_layers == 1 ? 0 : draft.num_hidden_layers;
    CompareConfigs(target, draft, &problems);
    if (!dummy) {
      source.checkpoint = std::make_unique<io::Checkpoint>(options.draft_model_path);
      weights = source.checkpoint.get();
    }
  }
  if (!dummy && weights != nullptr) {
    const std::vector<std::string> missing = NextnLayer::MissingTensors(
        StrCat("model.layers.", source.layer, "."), [&](const std::string& name) { return weights->Has(name); });
    if (!missing.empty()) {
      std::string list;
      for (const std::string& m : missing) list += (list.empty() ? "" : ", ") + m;
      problems.push_back(StrCat(weights->dir(), " has no NextN layer ", source.layer, " (missing ", list, ")"));
    }
  }
  if (!problems.empty()) {
    std::string text;
    for (const std::string& p : problems) text += (text.empty() ? "" : "; ") + p;
    Fail("speculative decoding (draft layer from ", where, "): ", text);
  }
  return source;
}

}  // namespace fission::model
