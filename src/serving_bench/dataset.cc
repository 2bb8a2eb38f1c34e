#include "serving_bench/dataset.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <fstream>
#include <random>

#include "base/error.h"
#include "base/json.h"
#include "tokenizer/tokenizer.h"

namespace fission::serving_bench {

namespace {

using Ids = std::vector<std::int32_t>;

class IdSampler {
 public:
  IdSampler(const tokenizer::Tokenizer& tok, std::mt19937_64& rng) : tok_(tok), rng_(rng) {
    vocab_ = tok.vocab_size();
    if (vocab_ <= 2) Fail("random dataset: tokenizer vocabulary too small (", vocab_, ")");
  }
  // Shifts a special id (BOS, EOS, chat markers) to an ordinary neighbour: a prompt should not end
  // a sequence or open a turn.
  std::int32_t Ordinary(std::int64_t id) const {
    id %= vocab_;
    for (std::int64_t tries = 0; tries < vocab_ && tok_.IsSpecial(static_cast<std::int32_t>(id)); ++tries) {
      id = (id + 1) % vocab_;
    }
    return static_cast<std::int32_t>(id);
  }
  std::int32_t Random() { return Ordinary(std::uniform_int_distribution<std::int64_t>(0, vocab_ - 1)(rng_)); }
  std::int64_t vocab() const { return vocab_; }

 private:
  const tokenizer::Tokenizer& tok_;
  std::mt19937_64& rng_;
  std::int64_t vocab_;
};

// Adjusts `ids` until Encode(fixed + Decode(ids)) has `target` tokens; returns the text and its
// measured length.
std::pair<std::string, std::int64_t> FitToLength(const tokenizer::Tokenizer& tok, const std::string& fixed, Ids ids,
                                                 std::int64_t target, int rounds, IdSampler& sampler) {
  for (int round = 0;; ++round) {
    std::string text = fixed + tok.Decode(ids, /*skip_special_tokens=*/false);
    const auto measured = static_cast<std::int64_t>(tok.Encode(text, /*add_special_tokens=*/false).size());
    if (measured == target || round >= rounds) return {std::move(text), measured};
    const std::int64_t fixed_len =
        fixed.empty() ? 0 : static_cast<std::int64_t>(tok.Encode(fixed, false).size());
    // Work on the re-encoded suffix, as a server would see it.
    ids = tok.Encode(tok.Decode(ids, false), false);
    const std::int64_t want = std::max<std::int64_t>(target - fixed_len, 0);
    const std::int64_t have = measured - fixed_len;
    if (have < want) {
      for (std::int64_t i = have; i < want; ++i) ids.push_back(sampler.Random());
    } else {
      const std::int64_t drop = std::min<std::int64_t>(measured - target, static_cast<std::int64_t>(ids.size()));
      ids.resize(ids.size() - static_cast<size_t>(drop));
    }
  }
}

std::int64_t LowerBound(std::int64_t len, double ratio) {
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(std::floor(static_cast<double>(len) * ratio)));
}

}  // namespace

std::vector<DatasetRow> SampleRandomRequests(const RandomDatasetOptions& o, const tokenizer::Tokenizer& tok) {
  if (o.num_prompts <= 0) Fail("--num-prompts must be positive, got ", o.num_prompts);
  if (o.input_len <= 0) Fail("--random-input-len must be positive, got ", o.input_len);
  if (o.output_len <= 0) Fail("--random-output-len must be positive, got ", o.output_len);
  if (!(o.range_ratio >= 0.0 && o.range_ratio <= 1.0)) {
    Fail("--random-range-ratio must be in [0, 1], got ", o.range_ratio);
  }
  if (o.prefix_len < 0) Fail("--random-prefix-len must be >= 0, got ", o.prefix_len);
  std::mt19937_64 rng(o.seed);
  IdSampler sampler(tok, rng);
  std::uniform_int_distribution<std::int64_t> input_dist(LowerBound(o.input_len, o.range_ratio), o.input_len);
  std::uniform_int_distribution<std::int64_t> output_dist(LowerBound(o.output_len, o.range_ratio), o.output_len);
  std::vector<std::int64_t> input_lens(o.num_prompts), output_lens(o.num_prompts), offsets(o.num_prompts);
  for (auto& v : input_lens) v = input_dist(rng);
  for (auto& v : output_lens) v = output_dist(rng);
  for (auto& v : offsets) v = std::uniform_int_distribution<std::int64_t>(0, sampler.vocab() - 1)(rng);

  std::string prefix_text;
  if (o.prefix_len > 0) {
    Ids prefix;
    for (std::int64_t j = 0; j < o.prefix_len; ++j) prefix.push_back(sampler.Random());
    prefix_text = FitToLength(tok, "", prefix, o.prefix_len, o.max_fit_rounds, sampler).first;
  }
  std::vector<DatasetRow> rows;
  rows.reserve(o.num_prompts);
  for (int i = 0; i < o.num_prompts; ++i) {
    Ids ids;
    ids.reserve(input_lens[i]);
    for (std::int64_t j = 0; j < input_lens[i]; ++j) ids.push_back(sampler.Ordinary(offsets[i] + i + j));
    auto [text, measured] =
        FitToLength(tok, prefix_text, std::move(ids), o.prefix_len + input_lens[i], o.max_fit_rounds, sampler);
    rows.push_back({std::move(text), measured, output_lens[i], {}, {}});
  }
  return rows;
}

namespace {

// A line's token ids ("prompt_ids"), or empty when it has none.
std::vector<std::int32_t> PromptIds(const Json& j, const std::string& where) {
  auto it = j.find("prompt_ids");
  if (it == j.end() || it->is_null()) return {};
  if (!it->is_array() || it->empty()) Fail(where, ": prompt_ids must be a non-empty array of token ids");
  std::vector<std::int32_t> ids;
  for (const Json& id : *it) {
    if (!id.is_number_integer() || id.get<std::int64_t>() < 0 || id.get<std::int64_t>() > INT32_MAX) {
      Fail(where, ": prompt_ids holds '", id.dump(), "', not a token id");
    }
    ids.push_back(id.get<std::int32_t>());
  }
  return ids;
}

}  // namespace

std::vector<DatasetRow> LoadJsonlRequests(const std::string& path, int num_prompts, std::int64_t default_output_len,
                                          const tokenizer::Tokenizer* tok) {
  std::ifstream in(path);
  if (!in) Fail("--dataset-path: cannot open '", path, "'");
  std::vector<DatasetRow> rows;
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = StrCat(path, ":", line_no);
    const Json j = ParseJson(line, where);
    if (!j.is_object()) Fail(where, ": expected a JSON object");
    DatasetRow row;
    row.prompt_ids = PromptIds(j, where);
    if (row.prompt_ids.empty() || j.contains("prompt")) row.prompt = GetString(j, "prompt", where);
    row.output_len = GetInt(j, "output_len", where, default_output_len);
    if (row.output_len <= 0) Fail(where, ": output_len must be positive");
    if (!row.prompt_ids.empty()) {
      row.prompt_len = static_cast<std::int64_t>(row.prompt_ids.size());  // what the server receives
    } else if (auto len = GetOptionalInt(j, "prompt_len", where)) {
      row.prompt_len = *len;
    } else if (tok) {
      row.prompt_len = static_cast<std::int64_t>(tok->Encode(row.prompt, false).size());
    } else {
      Fail(where, ": no prompt_len and no --tokenizer to measure the prompt");
    }
    rows.push_back(std::move(row));
    if (num_prompts > 0 && static_cast<int>(rows.size()) == num_prompts) break;
  }
  if (rows.empty()) Fail("--dataset-path: '", path, "' holds no prompts");
  return rows;
}

std::string DescribeLengths(const std::vector<DatasetRow>& rows) {
  std::int64_t in_sum = 0, out_sum = 0;
  std::int64_t in_min = INT64_MAX, in_max = 0, out_min = INT64_MAX, out_max = 0;
  for (const DatasetRow& r : rows) {
    in_sum += r.prompt_len;
    out_sum += r.output_len;
    in_min = std::min(in_min, r.prompt_len);
    in_max = std::max(in_max, r.prompt_len);
    out_min = std::min(out_min, r.output_len);
    out_max = std::max(out_max, r.output_len);
  }
  const double n = rows.empty() ? 1.0 : static_cast<double>(rows.size());
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "#Input tokens: %lld\n#Output tokens: %lld\n"
                "Input lengths: min %lld, mean %.1f, max %lld\nOutput lengths: min %lld, mean %.1f, max %lld\n",
                static_cast<long long>(in_sum), static_cast<long long>(out_sum), static_cast<long long>(in_min),
                static_cast<double>(in_sum) / n, static_cast<long long>(in_max), static_cast<long long>(out_min),
                static_cast<double>(out_sum) / n, static_cast<long long>(out_max));
  return buf;
}

}  // namespace fission::serving_bench
