// The NextN draft layer on the tiny checkpoint (tools/golden/add_mtp_layer.py): a verify run's
// rows give exactly the logits plain decode steps give, the two checkpoint layouts load the same
// layer, and tensor parallelism leaves the draft's logits unchanged.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "model/draft_head.h"
#include "model/runtime/model_loader.h"

namespace fission::model {
namespace {

constexpr std::int32_t kPage = 4;

std::string ModelDir(const std::string& name) {
  return std::string(FISSION_SOURCE_DIR) + "/tests/fixtures/models/" + name;
}

LoadOptions WithDraft(int tp = 1) {
  LoadOptions o;
  o.load_draft = true;
  o.tp_size = tp;
  return o;
}

// One sequence's rows [first, first + tokens.size()) on pages 0, 1, 2, ...
ForwardBatch Rows(const std::vector<std::int32_t>& tokens, std::int32_t first, bool verify, bool all_logits) {
  ForwardBatch b;
  SequenceSlice s;
  s.query_start = 0;
  s.query_len = static_cast<std::int32_t>(tokens.size());
  s.context_len = first;
  s.verify = verify;
  const std::int32_t end = first + s.query_len;
  for (std::int32_t p = 0; p < (end + kPage - 1) / kPage; ++p) s.block_table.push_back(p);
  b.sequences.push_back(s);
  for (std::int32_t i = 0; i < s.query_len; ++i) {
    b.token_ids.push_back(tokens[i]);
    b.positions.push_back(first + i);
    b.kv_slots.push_back(first + i);  // page p holds positions [4p, 4p + 4)
    if (all_logits || i + 1 == s.query_len) b.logits_indices.push_back(i);
  }
  return b;
}

std::int32_t Argmax(const float* row, std::int64_t n) {
  std::int32_t best = 0;
  for (std::int64_t i = 1; i < n; ++i)
    if (row[i] > row[best]) best = static_cast<std::int32_t>(i);
  return best;
}

const std::vector<std::int32_t> kPrompt = {5, 77, 300, 12, 409, 33};

TEST(DraftLayer, VerifyRowsAreDecodeRowsBitForBit) {
  auto model = LoadCausalLM(ModelDir("tiny-deepseek-v3"), WithDraft());
  ASSERT_TRUE(model->has_draft());
  EXPECT_EQ(model->Memory().index_of("nextn_latent"), 1);
  const std::int64_t vocab = model->vocab_size();
  model->AllocateMemory({16, kPage, 0});
  Buffer prefill = ForwardToHost(*model, Rows(kPrompt, 0, false, false));
  std::vector<std::int32_t> next = {Argmax(prefill.ptr<float>(), vocab)};
  std::vector<std::vector<float>> decode_logits;
  for (int step = 0; step < 3; ++step) {
    Buffer l = ForwardToHost(*model, Rows({next.back()}, static_cast<std::int32_t>(kPrompt.size()) + step, false, false));
    decode_logits.emplace_back(l.ptr<float>(), l.ptr<float>() + vocab);
    next.push_back(Argmax(l.ptr<float>(), vocab));
  }
  // Again from a fresh memory: the prompt, then one verify run of the first token and two drafts.
  model->AllocateMemory({16, kPage, 0});
  ForwardToHost(*model, Rows(kPrompt, 0, false, false));
  Buffer verify = ForwardToHost(*model, Rows({next[0], next[1], next[2]}, static_cast<std::int32_t>(kPrompt.size()), true, true));
  for (int j = 0; j < 3; ++j)
    EXPECT_EQ(std::memcmp(verify.ptr<float>() + j * vocab, decode_logits[j].data(), vocab * sizeof(float)), 0)
        << "row " << j;
}

// A draft extend over the prompt's rows (each reads the next token and the target's hidden row).
Buffer DraftLogits(CausalLM& model) {
  model.AllocateMemory({16, kPage, 0});
  Buffer prefill = ForwardToHost(model, Rows(kPrompt, 0, false, false));
  DraftBatch d;
  std::vector<std::int32_t> next(kPrompt.begin() + 1, kPrompt.end());
  next.push_back(Argmax(prefill.ptr<float>(), model.vocab_size()));
  d.batch = Rows(next, 0, false, true);
  for (std::size_t i = 0; i < next.size(); ++i) d.hidden_rows.push_back(static_cast<std::int32_t>(i));
  return HostLogits(model.ForwardDraft(d));
}

double RelativeL2(const Buffer& a, const Buffer& b) {
  double num = 0, den = 0;
  for (std::int64_t i = 0; i < a.tensor().numel(); ++i) {
    const double d = a.ptr<float>()[i] - b.ptr<float>()[i];
    num += d * d;
    den += static_cast<double>(b.ptr<float>()[i]) * b.ptr<float>()[i];
  }
  return std::sqrt(num / den);
}

TEST(DraftLayer, BothLayoutsAndTensorParallelismGiveTheSameDraft) {
  auto own = LoadCausalLM(ModelDir("tiny-deepseek-v3"), WithDraft());
  LoadOptions o = WithDraft();
  o.draft_model_path = ModelDir("tiny-deepseek-v3-nextn");
  auto exported = LoadCausalLM(ModelDir("tiny-deepseek-v3"), o);
  const Buffer a = DraftLogits(*own), b = DraftLogits(*exported);
  ASSERT_EQ(a.tensor().shape, b.tensor().shape);
  EXPECT_EQ(std::memcmp(a.ptr<float>(), b.ptr<float>(), a.tensor().bytes()), 0);
  auto tp2 = LoadCausalLM(ModelDir("tiny-deepseek-v3"), WithDraft(2));
  EXPECT_LT(RelativeL2(DraftLogits(*tp2), a), 1e-5);
  // The draft's logits are not the target's: the layer ran.
  EXPECT_GT(a.tensor().numel(), 0);
}

// Padded extends (model/draft_batch.h) are for draft layers whose padding rows write nothing: the
// NextN layer's one latent class of one position per entry; not a layer with per-request state or
// compressed entries.
class ClassesOnlyHead final : public DraftHead {
 public:
  explicit ClassesOnlyHead(std::vector<CacheClass> classes) : classes_(std::move(classes)) {}
  std::vector<CacheClass> Memory() const override { return classes_; }
  void Forward(const StepContext&, const Tensor&, const Tensor&, int, const Tensor&) const override {}

 private:
  std::vector<CacheClass> classes_;
};

TEST(DraftLayer, PaddedExtendsNeedLayersThatPaddingRowsLeaveAlone) {
  CacheClass latent{"latent", CacheKind::kPaged, 1, 0, 1, {{"latent", DType::kF32, 8}}};
  CacheClass compressed = latent, window = latent;
  compressed.tokens_per_entry = 4;
  window.kind = CacheKind::kPerRequest;
  window.entries_per_request = 128;
  EXPECT_TRUE(ClassesOnlyHead({latent}).TakesPaddingRows());
  EXPECT_FALSE(ClassesOnlyHead({latent, compressed}).TakesPaddingRows());
  EXPECT_FALSE(ClassesOnlyHead({latent, window}).TakesPaddingRows());
  // The NextN layer takes them once the engine announces S (with or without graphs).
  auto model = LoadCausalLM(ModelDir("tiny-deepseek-v3"), WithDraft());
  EXPECT_EQ(model->padded_extend_rows(), 0);
  model->AllocateMemory({16, kPage, 0});
  model->CaptureDecodeGraphs(3);
  EXPECT_EQ(model->padded_extend_rows(), 4);
  model->CaptureDecodeGraphs(0);  // plain decoding
  EXPECT_EQ(model->padded_extend_rows(), 0);
  auto plain = LoadCausalLM(ModelDir("tiny-deepseek-v3"));
  plain->AllocateMemory({16, kPage, 0});
  plain->CaptureDecodeGraphs(3);
  EXPECT_EQ(plain->padded_extend_rows(), 0);
}

TEST(DraftLayer, AModelWithoutTheFlagHasNoDraft) {
  auto model = LoadCausalLM(ModelDir("tiny-deepseek-v3"));
  EXPECT_FALSE(model->has_draft());
  EXPECT_EQ(model->Memory().classes.size(), 1u);
  EXPECT_THROW(model->ForwardDraft(DraftBatch{}), Error);
}

}  // namespace
}  // namespace fission::model
