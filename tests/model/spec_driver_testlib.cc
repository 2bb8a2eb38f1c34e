#include "model/spec_driver_testlib.h"

#include <algorithm>

#include "base/error.h"
#include "model/step_runner_testlib.h"

namespace fission::model {

SpecDriver::SpecDriver(CausalLM& model, int sequences, std::int32_t page_size, std::int32_t pages_per_sequence)
    : model_(model), page_(page_size), seqs_(sequences) {
  model.AllocateMemory({sequences * pages_per_sequence, page_size, 0});
  // Sequence i holds pages i, i + n, i + 2n, ...: tables that interleave.
  for (int i = 0; i < sequences; ++i)
    for (int p = 0; p < pages_per_sequence; ++p) seqs_[i].pages.push_back(p * sequences + i);
}

namespace {

// Prefills sequence `s` with `prompt` in both drivers, then its draft extend.
void PrefillBoth(SpecDriver& a, SpecDriver& b, int s, const std::vector<std::int32_t>& prompt,
                 const CompareSteps& compare) {
  a.SetChunks({s});
  b.SetChunks({s});
  const LogitRows want = b.Target({{s, prompt}}, false);
  compare(a.Target({{s, prompt}}, false), want, 1, "prefill");
  std::vector<std::int32_t> known = prompt;
  known.push_back(Argmax(want.back()));
  const auto length = static_cast<std::int32_t>(prompt.size());
  a.Commit(s, length, known);
  b.Commit(s, length, known);
  compare(a.Extend({length}), b.Extend({length}), 1, "prefill extend");
}

}  // namespace

void SpeculateBoth(CausalLM& test, CausalLM& reference, const std::vector<int>& lengths,
                   const std::vector<std::vector<int>>& batches, int rounds, int drafts, const CompareSteps& compare,
                   std::int32_t page_size) {
  const int n = static_cast<int>(lengths.size());
  std::int32_t longest = 0;
  for (int l : lengths) longest = std::max(longest, l);
  const std::int32_t pages = (longest + rounds * static_cast<std::int32_t>(batches.size()) * (drafts + 2)) / page_size + 2;
  SpecDriver a(test, n, page_size, pages), b(reference, n, page_size, pages);
  test.CaptureDecodeGraphs(drafts);  // as the engine does, for its memory
  const std::int32_t padded = test.padded_extend_rows();
  for (int s = 0; s < n; ++s) PrefillBoth(a, b, s, Tokens(lengths[s], 40 + s, reference.vocab_size()), compare);
  for (int round = 0; round < rounds; ++round)
    for (const std::vector<int>& batch : batches) {
      const std::string what = StrCat("round ", round, ", batch of ", batch.size());
      std::vector<std::pair<int, std::vector<std::int32_t>>> chunks;
      for (int s : batch) {
        const std::int32_t next = b.tokens(s).back();
        std::vector<std::int32_t> run = {next};
        for (int d = 0; d < drafts; ++d)
          run.push_back(static_cast<std::int32_t>((next * 31 + 7 * d + round) % reference.vocab_size()));
        chunks.push_back({s, run});
      }
      a.SetChunks(batch);
      b.SetChunks(batch);
      const LogitRows verify = b.Target(chunks, true);
      compare(a.Target(chunks, true), verify, batch.size(), what + " (verify)");
      std::vector<std::int32_t> rows, positions, tokens;
      for (std::size_t k = 0; k < batch.size(); ++k) {
        const std::int32_t kept = (round + static_cast<std::int32_t>(k)) % (drafts + 1);
        // The kept drafts and the target's own token after them.
        std::vector<std::int32_t> emitted(chunks[k].second.begin() + 1, chunks[k].second.begin() + 1 + kept);
        emitted.push_back(Argmax(verify[k * (drafts + 1) + kept]));
        a.Commit(batch[k], kept + 1, emitted);
        b.Commit(batch[k], kept + 1, emitted);
        rows.push_back(kept + 1);
      }
      // The extend's rows: the run's first token and the kept drafts, each reading its hidden row.
      const LogitRows extend = b.Extend(rows, padded);
      compare(a.Extend(rows, padded), extend, batch.size(), what + " (extend)");
      for (std::size_t k = 0; k < batch.size(); ++k) {
        positions.push_back(static_cast<std::int32_t>(b.tokens(batch[k]).size()) - 1);
        tokens.push_back(Argmax(extend[k]));
      }
      for (int step = 1; step < drafts; ++step) {
        const LogitRows chained = b.Chain(positions, tokens);
        compare(a.Chain(positions, tokens), chained, batch.size(), StrCat(what, " (draft step ", step, ")"));
        for (std::size_t k = 0; k < batch.size(); ++k) {
          ++positions[k];
          tokens[k] = Argmax(chained[k]);
        }
      }
    }
}

}  // namespace fission::model
