#include "serving_bench/dataset_choice.h"

#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>

#include "base/error.h"
#include "base/json.h"
#include "base/python_random.h"
#include "serving_bench/dataset.h"
#include "serving_bench/sglang_datasets.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace fission::serving_bench {

namespace {

const tokenizer::Tokenizer& NeedTokenizer(const tokenizer::Tokenizer* tok, const std::string& dataset) {
  if (!tok) Fail("the ", dataset, " dataset needs a tokenizer: pass --tokenizer DIR (a folder with tokenizer.json)");
  return *tok;
}

std::vector<DatasetRow> RandomRows(const BenchArgs& a, const tokenizer::Tokenizer& tok) {
  RandomDatasetOptions d;
  d.num_prompts = a.num_prompts;
  d.input_len = a.input_len;
  d.output_len = a.output_len;
  d.range_ratio = a.range_ratio;
  d.prefix_len = a.prefix_len;
  d.seed = a.seed;
  return SampleRandomRequests(d, tok);
}

std::vector<DatasetRow> RandomIdsRows(const BenchArgs& a, const tokenizer::Tokenizer& tok) {
  RandomIdsOptions d;
  d.num_prompts = a.num_prompts;
  d.input_len = a.input_len;
  d.output_len = a.output_len;
  d.range_ratio = a.range_ratio;
  d.seed = a.seed;
  d.keep_ids = a.tokenize_prompt;
  return SampleRandomIdsRequests(d, tok);
}

std::vector<DatasetRow> SharedPrefixRows(const BenchArgs& a, const tokenizer::Tokenizer& tok, std::ostream& out) {
  SharedPrefixOptions d;
  d.num_groups = a.gsp_num_groups;
  d.prompts_per_group = a.gsp_prompts_per_group;
  d.system_prompt_len = a.gsp_system_prompt_len;
  d.question_len = a.gsp_question_len;
  d.output_len = a.gsp_output_len;
  d.range_ratio = a.gsp_range_ratio;
  d.ordered = a.gsp_ordered;
  d.seed = a.seed;
  std::vector<DatasetRow> rows = SampleSharedPrefixRequests(d, tok);
  out << "\nGenerated shared prefix dataset statistics:\nNumber of groups: " << a.gsp_num_groups
      << "\nPrompts per group: " << a.gsp_prompts_per_group << "\nTotal prompts: " << rows.size() << "\n";
  return rows;
}

void WrapAll(std::vector<DatasetRow>& rows, const tokenizer::Tokenizer& tok) {
  const auto wrap = ChatTemplateWrapper(tok);
  for (DatasetRow& r : rows) {
    r.prompt = wrap(r.prompt);
    r.prompt_len = static_cast<std::int64_t>(tok.Encode(r.prompt, /*add_special_tokens=*/true).size());
  }
}

}  // namespace

std::function<std::string(const std::string&)> ChatTemplateWrapper(const tokenizer::Tokenizer& tok) {
  auto chat = std::make_shared<tokenizer::ChatTemplate>(tokenizer::ChatTemplate::ForModel(tok.config(), std::nullopt));
  const std::string bos = tok.config().bos_token.value_or("");
  const tokenizer::TokenizerConfig* config = &tok.config();
  return [chat, bos, config](const std::string& prompt) {
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    messages.push_back({{"role", "user"}, {"content", prompt}});
    tokenizer::ChatRenderOptions options;
    options.add_generation_prompt = true;
    std::string text = chat->Apply(messages, options, *config);
    if (!bos.empty()) {
      for (size_t p = text.find(bos); p != std::string::npos; p = text.find(bos, p)) text.erase(p, bos.size());
    }
    return text;
  };
}

std::vector<DatasetRow> BuildDataset(const BenchArgs& a, const tokenizer::Tokenizer* tok, std::ostream& out) {
  const std::string& name = a.dataset_name;
  if (a.apply_chat_template && (name == "jsonl" || a.tokenize_prompt)) {
    Fail("--apply-chat-template wraps text prompts; it does not apply to ", a.tokenize_prompt ? "--tokenize-prompt" : "jsonl");
  }
  std::vector<DatasetRow> rows;
  if (name == "random") {
    rows = RandomRows(a, NeedTokenizer(tok, name));
  } else if (name == "random-ids") {
    rows = RandomIdsRows(a, NeedTokenizer(tok, name));
  } else if (name == "generated-shared-prefix") {
    rows = SharedPrefixRows(a, NeedTokenizer(tok, name), out);
  } else if (name == "sharegpt") {
    const tokenizer::Tokenizer& t = NeedTokenizer(tok, name);
    ShareGptOptions d;
    d.path = a.dataset_path;
    d.num_prompts = a.num_prompts;
    d.fixed_output_len = a.sharegpt_output_len;
    d.context_len = a.sharegpt_context_len;
    d.seed = a.seed;
    // As bench_serving, the template is applied before the prompt is measured.
    std::function<std::string(const std::string&)> wrap = [](const std::string& p) { return p; };
    if (a.apply_chat_template) wrap = ChatTemplateWrapper(t);
    return SampleShareGptRequests(d, t, wrap);
  } else {
    if (a.dataset_path.empty()) Fail("--dataset-name jsonl needs --dataset-path");
    return LoadJsonlRequests(a.dataset_path, a.num_prompts, a.output_len, tok);
  }
  if (a.apply_chat_template) WrapAll(rows, *tok);
  return rows;
}

void AssignLoraNames(std::vector<DatasetRow>& rows, const std::vector<std::string>& names, std::uint32_t seed) {
  if (names.empty()) return;
  PythonRandom rng(seed);
  for (DatasetRow& r : rows) r.lora_name = names[rng.RandBelow(names.size())];
}

void SaveDataset(const std::string& path, const std::vector<DatasetRow>& rows, const tokenizer::Tokenizer* tok) {
  std::error_code ec;
  const std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  std::ofstream f(p);
  if (!f) Fail("--save-dataset: cannot write '", path, "'");
  for (const DatasetRow& r : rows) {
    std::vector<std::int32_t> ids = r.prompt_ids;
    if (ids.empty()) {
      if (!tok) Fail("--save-dataset needs --tokenizer to write the token ids of text prompts");
      ids = tok->Encode(r.prompt, /*add_special_tokens=*/true);
    }
    const Json line = {{"prompt", r.prompt}, {"prompt_ids", ids}, {"prompt_len", ids.size()},
                       {"output_len", r.output_len}};
    f << line.dump(-1, ' ', false, Json::error_handler_t::replace) << "\n";
  }
  if (!f) Fail("--save-dataset: writing '", path, "' failed");
}

}  // namespace fission::serving_bench
