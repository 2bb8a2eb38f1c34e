// The step plan codec: round trips of real step shapes, and malformed plans rejected.
#include "model/step_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.h"

namespace fission::model {
namespace {

using ::testing::HasSubstr;

// A mixed step: a prefill chunk after a prefix-cache hit (sequence 0: 5 new after 8 cached), a
// first prefill chunk (sequence 1), and two decode tokens (sequences 2 and 3). Pages of 4 rows.
StepPlan MixedPlan() {
  StepPlan p;
  p.cache_id = 3;
  p.num_pages = 16;
  p.page_size = 4;
  ForwardBatch& b = p.batch;
  b.token_ids = {10, 11, 12, 13, 14, 20, 21, 22, 30, 40};
  b.positions = {8, 9, 10, 11, 12, 0, 1, 2, 17, 3};
  b.kv_slots = {8, 9, 10, 11, 12, 20, 21, 22, 45, 63};
  b.sequences = {{0, 5, 8, {0, 1, 2, 3}}, {5, 3, 0, {5}}, {8, 1, 17, {6, 7, 9, 10, 11}}, {9, 1, 3, {15}}};
  b.logits_indices = {4, 7, 8, 9};
  return p;
}

void ExpectEqual(const StepPlan& a, const StepPlan& b) {
  EXPECT_EQ(a.cache_id, b.cache_id);
  EXPECT_EQ(a.num_pages, b.num_pages);
  EXPECT_EQ(a.page_size, b.page_size);
  EXPECT_EQ(a.batch.token_ids, b.batch.token_ids);
  EXPECT_EQ(a.batch.positions, b.batch.positions);
  EXPECT_EQ(a.batch.kv_slots, b.batch.kv_slots);
  EXPECT_EQ(a.batch.logits_indices, b.batch.logits_indices);
  ASSERT_EQ(a.batch.sequences.size(), b.batch.sequences.size());
  for (std::size_t i = 0; i < a.batch.sequences.size(); ++i) {
    const SequenceSlice &x = a.batch.sequences[i], &y = b.batch.sequences[i];
    EXPECT_EQ(x.query_start, y.query_start);
    EXPECT_EQ(x.query_len, y.query_len);
    EXPECT_EQ(x.context_len, y.context_len);
    EXPECT_EQ(x.block_table, y.block_table);
  }
}

std::string DecodeError(std::string_view bytes) {
  try {
    DecodeStepPlan(bytes);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(StepPlan, RoundTripsPrefillDecodeAndPrefixHits) {
  const StepPlan plan = MixedPlan();
  const std::string bytes = EncodeStepPlan(plan);
  ExpectEqual(DecodeStepPlan(bytes), plan);
  // Compact: 16 bytes a token plus small headers.
  EXPECT_LT(bytes.size(), 16u * 10 + 4 * 16 + 4 * 11 + 4 * 4 + 64);
}

TEST(StepPlan, RoundTripsAnEmptyStepAndDecodeOnly) {
  StepPlan empty;
  empty.num_pages = 1;
  empty.page_size = 1;
  ExpectEqual(DecodeStepPlan(EncodeStepPlan(empty)), empty);
  StepPlan decode;
  decode.num_pages = 4;
  decode.page_size = 2;
  decode.batch.token_ids = {7, 8};
  decode.batch.positions = {3, 0};
  decode.batch.kv_slots = {3, 4};
  decode.batch.sequences = {{0, 1, 3, {0, 1}}, {1, 1, 0, {2}}};
  decode.batch.logits_indices = {0, 1};
  ExpectEqual(DecodeStepPlan(EncodeStepPlan(decode)), decode);
}

TEST(StepPlan, EveryTruncationIsRejected) {
  const std::string bytes = EncodeStepPlan(MixedPlan());
  for (std::size_t n = 0; n < bytes.size(); ++n) EXPECT_NE(DecodeError(bytes.substr(0, n)), "") << n;
  EXPECT_THAT(DecodeError(bytes + "x"), HasSubstr("1 unexpected bytes after the plan"));
}

TEST(StepPlan, BadHeaderIsRejected) {
  std::string bytes = EncodeStepPlan(MixedPlan());
  EXPECT_THAT(DecodeError("JUNK"), HasSubstr("bad magic"));
  std::string v = bytes;
  v[4] = 9;
  EXPECT_THAT(DecodeError(v), HasSubstr("version 9"));
  // A huge token count must not allocate: checked against the bytes left.
  std::string huge = bytes;
  huge[28] = huge[29] = static_cast<char>(0x7F);  // the token count (bytes 26..29)
  EXPECT_THAT(DecodeError(huge), HasSubstr("step plan: the tokens needs"));
}

TEST(StepPlan, IndicesOutsideWhatTheyIndexAreRejected) {
  auto error_of = [](auto mutate) {
    StepPlan p = MixedPlan();
    mutate(p);
    return DecodeError(EncodeStepPlan(p));
  };
  EXPECT_THAT(error_of([](StepPlan& p) { p.batch.kv_slots[2] = 64; }), HasSubstr("writes slot 64 outside [0, 64)"));
  EXPECT_THAT(error_of([](StepPlan& p) { p.batch.kv_slots[0] = -1; }), HasSubstr("writes slot -1"));
  EXPECT_THAT(error_of([](StepPlan& p) { p.batch.sequences[1].block_table[0] = 16; }),
              HasSubstr("names page 16 outside [0, 16)"));
  EXPECT_THAT(error_of([](StepPlan& p) { p.batch.sequences[0].block_table.pop_back(); }),
              HasSubstr("has 3 pages for 13 tokens"));
  EXPECT_THAT(error_of([](StepPlan& p) { p.batch.sequences[2].query_start = 7; }), HasSubstr("sequence 2 has tokens"));
  EXPECT_THAT(error_of([](StepPlan& p) { p.batch.sequences[3].query_len = 2; }), HasSubstr("sequence 3 has tokens"));
  EXPECT_THAT(error_of([](StepPlan& p) { p.batch.sequences.pop_back(); }), HasSubstr("cover 9 of 10 tokens"));
  EXPECT_THAT(error_of([](StepPlan& p) { p.batch.sequences[0].context_len = -1; }), HasSubstr("sequence 0"));
  EXPECT_THAT(error_of([](StepPlan& p) { p.batch.logits_indices[1] = 10; }), HasSubstr("logits row 10 outside"));
  EXPECT_THAT(error_of([](StepPlan& p) { p.batch.token_ids[0] = -5; }), HasSubstr("negative id"));
  EXPECT_THAT(error_of([](StepPlan& p) { p.batch.positions[0] = -1; }), HasSubstr("negative position"));
  EXPECT_THAT(error_of([](StepPlan& p) { p.num_pages = 0; }), HasSubstr("bad cache geometry"));
  EXPECT_THAT(error_of([](StepPlan& p) { p.page_size = std::int64_t{1} << 40; }), HasSubstr("bad cache geometry"));
}

TEST(StepPlan, SingleByteCorruptionNeverCrashes) {
  // Every byte flipped in turn: either a valid plan or an Error, never anything else.
  const std::string bytes = EncodeStepPlan(MixedPlan());
  int rejected = 0;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    for (unsigned char x : {0x01, 0x80, 0xFF}) {
      std::string b = bytes;
      b[i] = static_cast<char>(b[i] ^ x);
      rejected += !DecodeError(b).empty();
    }
  }
  EXPECT_GT(rejected, 0);
}

}  // namespace
}  // namespace fission::model
