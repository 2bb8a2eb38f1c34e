#include "serving_bench/sglang_datasets.h"

#include "base/error.h"
#include "base/json.h"
#include "base/numpy_random.h"
#include "base/python_random.h"
#include "tokenizer/tokenizer.h"

namespace fission::serving_bench {

namespace {

// bench_serving's compute_random_lens.
std::vector<std::int64_t> RandomLens(NumpyRandom& rng, std::int64_t full_len, double ratio, std::size_t n) {
  const auto low = std::max<std::int64_t>(static_cast<std::int64_t>(static_cast<double>(full_len) * ratio), 1);
  if (low > full_len) Fail("length range [", low, ", ", full_len, "] is empty");
  return rng.RandInts(low, full_len + 1, n);
}

void CheckRatio(const char* flag, double ratio) {
  if (!(ratio >= 0.0 && ratio <= 1.0)) Fail(flag, " must be in [0, 1], got ", ratio);
}

// A ShareGPT entry's turns: "conversations", or "conversation" as some exports name it.
const Json* Turns(const Json& entry) {
  if (!entry.is_object()) return nullptr;
  for (const char* key : {"conversations", "conversation"}) {
    if (auto it = entry.find(key); it != entry.end() && it->is_array()) return &*it;
  }
  return nullptr;
}

std::string TurnText(const Json& turn, const std::string& where) {
  if (!turn.is_object() || !turn.contains("value") || !turn["value"].is_string()) {
    Fail(where, ": a turn without a string 'value'");
  }
  return turn["value"].get<std::string>();
}

// bench_serving's gen_prompt: `n` tokens drawn uniformly, decoded.
std::string RandomText(PythonRandom& rng, const tokenizer::Tokenizer& tok, std::int64_t n) {
  std::vector<std::int32_t> ids(static_cast<std::size_t>(n));
  const auto vocab = static_cast<std::size_t>(tok.vocab_size());
  for (std::int32_t& id : ids) id = static_cast<std::int32_t>(rng.ChoiceIndex(vocab));
  return tok.Decode(ids, /*skip_special_tokens=*/false);
}

}  // namespace

std::vector<DatasetRow> SampleRandomIdsRequests(const RandomIdsOptions& o, const tokenizer::Tokenizer& tok) {
  if (o.num_prompts <= 0) Fail("--num-prompts must be positive, got ", o.num_prompts);
  if (o.input_len <= 0 || o.output_len <= 0) Fail("--random-input-len and --random-output-len must be positive");
  CheckRatio("--random-range-ratio", o.range_ratio);
  const std::int64_t vocab = tok.base_vocab_size();
  if (vocab <= 0) Fail("random-ids: the tokenizer has an empty vocabulary");
  NumpyRandom rng(o.seed);
  const auto n = static_cast<std::size_t>(o.num_prompts);
  const std::vector<std::int64_t> input_lens = RandomLens(rng, o.input_len, o.range_ratio, n);
  const std::vector<std::int64_t> output_lens = RandomLens(rng, o.output_len, o.range_ratio, n);
  const std::vector<std::int64_t> offsets = rng.RandInts(0, vocab, n);
  std::vector<DatasetRow> rows(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::vector<std::int32_t> ids(static_cast<std::size_t>(input_lens[i]));
    for (std::size_t j = 0; j < ids.size(); ++j) {
      ids[j] = static_cast<std::int32_t>((offsets[i] + static_cast<std::int64_t>(i + j)) % vocab);
    }
    rows[i].prompt = tok.Decode(ids, /*skip_special_tokens=*/false);
    if (o.keep_ids) rows[i].prompt_ids = std::move(ids);
    rows[i].prompt_len = input_lens[i];
    rows[i].output_len = output_lens[i];
  }
  return rows;
}

std::vector<DatasetRow> SampleShareGptRequests(const ShareGptOptions& o, const tokenizer::Tokenizer& tok,
                                               const std::function<std::string(const std::string&)>& wrap) {
  if (o.path.empty()) {
    Fail("--dataset-name sharegpt needs --dataset-path FILE: a local ShareGPT JSON file (nothing is downloaded)");
  }
  if (o.fixed_output_len && *o.fixed_output_len < 4) Fail("--sharegpt-output-len must be at least 4");
  const Json data = ReadJsonFile(o.path);
  if (!data.is_array()) Fail(o.path, ": expected a JSON array of conversations");
  std::vector<std::pair<std::string, std::string>> pairs;
  for (std::size_t i = 0; i < data.size(); ++i) {
    const Json* turns = Turns(data[i]);
    if (turns == nullptr || turns->size() < 2) continue;
    const std::string where = StrCat(o.path, ": entry ", i);
    pairs.emplace_back(TurnText((*turns)[0], where), TurnText((*turns)[1], where));
  }
  PythonRandom rng(o.seed);
  std::vector<DatasetRow> rows;
  for (std::size_t index : rng.Shuffle(pairs.size())) {
    if (static_cast<int>(rows.size()) == o.num_prompts) break;
    DatasetRow row;
    row.prompt = wrap(pairs[index].first);
    row.prompt_len = static_cast<std::int64_t>(tok.Encode(row.prompt, /*add_special_tokens=*/true).size());
    row.output_len = o.fixed_output_len ? *o.fixed_output_len
                                        : static_cast<std::int64_t>(tok.Encode(pairs[index].second, true).size());
    if (row.prompt_len < 2 || row.output_len < 2) continue;
    if (o.context_len && row.prompt_len + row.output_len > *o.context_len) continue;
    rows.push_back(std::move(row));
  }
  if (rows.empty()) Fail(o.path, ": no conversation gave a usable prompt");
  return rows;
}

std::vector<DatasetRow> SampleSharedPrefixRequests(const SharedPrefixOptions& o, const tokenizer::Tokenizer& tok) {
  if (o.num_groups <= 0 || o.prompts_per_group <= 0) {
    Fail("--gsp-num-groups and --gsp-prompts-per-group must be positive");
  }
  if (o.system_prompt_len <= 0 || o.question_len <= 0 || o.output_len <= 0) {
    Fail("--gsp-system-prompt-len, --gsp-question-len and --gsp-output-len must be positive");
  }
  CheckRatio("--gsp-range-ratio", o.range_ratio);
  NumpyRandom lengths(o.seed);
  PythonRandom tokens(o.seed);
  const auto groups = static_cast<std::size_t>(o.num_groups);
  const std::size_t total = groups * static_cast<std::size_t>(o.prompts_per_group);
  const std::vector<std::int64_t> system_lens = RandomLens(lengths, o.system_prompt_len, o.range_ratio, groups);
  const std::vector<std::int64_t> question_lens = RandomLens(lengths, o.question_len, o.range_ratio, total);
  const std::vector<std::int64_t> output_lens = RandomLens(lengths, o.output_len, o.range_ratio, total);
  std::vector<std::string> systems, questions;
  for (std::int64_t len : system_lens) systems.push_back(RandomText(tokens, tok, len));
  for (std::int64_t len : question_lens) questions.push_back(RandomText(tokens, tok, len));
  std::vector<DatasetRow> rows;
  for (std::size_t i = 0; i < total; ++i) {
    DatasetRow row;
    row.prompt = systems[i / static_cast<std::size_t>(o.prompts_per_group)] + "\n\n" + questions[i];
    row.prompt_len = static_cast<std::int64_t>(tok.Encode(row.prompt, /*add_special_tokens=*/true).size());
    row.output_len = output_lens[i];
    rows.push_back(std::move(row));
  }
  if (o.ordered) return rows;
  std::vector<DatasetRow> shuffled;
  for (std::size_t index : tokens.Shuffle(rows.size())) shuffled.push_back(rows[index]);
  return shuffled;
}

}  // namespace fission::serving_bench
