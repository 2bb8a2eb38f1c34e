#include "model/v4_scenarios_testlib.h"

#include <algorithm>

#include "model/step_runner_testlib.h"

namespace fission::model {

std::vector<std::vector<float>> V4ChunkedPrefill(CausalLM& model, const std::vector<std::int32_t>& tokens,
                                                 const std::vector<std::size_t>& chunks, std::int64_t page_size) {
  StepRunner runner(model, page_size, 96, 7);
  const int seq = runner.AddSequence();
  std::vector<std::vector<float>> rows;
  std::size_t at = 0;
  for (std::size_t i = 0; at < tokens.size(); ++i) {
    const std::size_t len = i < chunks.size() ? std::min(chunks[i], tokens.size() - at) : tokens.size() - at;
    auto part = runner.Prefill(seq, {tokens.begin() + at, tokens.begin() + at + len}, /*all_logits=*/true);
    rows.insert(rows.end(), part.begin(), part.end());
    at += len;
  }
  return rows;
}

std::vector<std::vector<float>> V4MixedScenario(CausalLM& model, std::vector<std::int32_t>* tokens) {
  const std::int64_t vocab = model.vocab_size();
  StepRunner r(model, 4, 256, 5);
  const auto a = Tokens(140, 21, vocab), b = Tokens(33, 22, vocab), c = Tokens(61, 23, vocab);
  const int sa = r.AddSequence(), sb = r.AddSequence(), sc = r.AddSequence();
  std::vector<std::vector<float>> rows;
  auto keep = [&](const std::vector<std::vector<float>>& s) { rows.insert(rows.end(), s.begin(), s.end()); };
  keep(r.Step({{sa, {a.begin(), a.begin() + 70}}, {sb, b}}));
  keep(r.Step({{sa, {a.begin() + 70, a.end()}}, {sb, {5}}, {sc, c}}));
  const bool record = tokens->empty();
  std::vector<std::int32_t> next = {2, 3, 4};
  for (int step = 0, k = 0; step < 32; ++step) {
    const auto out = r.Step({{sa, {next[0]}}, {sb, {next[1]}}, {sc, {next[2]}}});
    keep(out);
    for (std::size_t i = 0; i < 3; ++i) {
      if (record) tokens->push_back(Argmax(out[i]));
      next[i] = (*tokens)[k++];
    }
  }
  return rows;
}

}  // namespace fission::model
