// The follower step codec: round trips of real step shapes, and malformed plans rejected.
#include "model/runtime/follower_step.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.h"

namespace fission::model {
namespace {

using ::testing::HasSubstr;

// A mixed step: a prefill chunk after a prefix-cache hit (sequence 0: 5 new after 8 cached), a
// first prefill chunk (sequence 1), and two decode tokens (sequences 2 and 3). Pages of 4 rows.
FollowerStep MixedPlan() {
  FollowerStep p;
  p.memory = {16, 4, 6};
  ForwardBatch& b = p.batch;
  b.token_ids = {10, 11, 12, 13, 14, 20, 21, 22, 30, 40};
  b.positions = {8, 9, 10, 11, 12, 0, 1, 2, 17, 3};
  b.kv_slots = {8, 9, 10, 11, 12, 20, 21, 22, 45, 63};
  b.sequences = {{0, 5, 8, {0, 1, 2, 3}, 2}, {5, 3, 0, {5}, 0}, {8, 1, 17, {6, 7, 9, 10, 11}, 5}, {9, 1, 3, {15}, -1}};
  b.logits_indices = {4, 7, 8, 9};
  return p;
}

void ExpectEqual(const FollowerStep& a, const FollowerStep& b) {
  EXPECT_EQ(a.memory, b.memory);
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
    EXPECT_EQ(x.state_slot, y.state_slot);
  }
}

std::string DecodeError(std::string_view bytes) {
  try {
    DecodeFollowerStep(bytes);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(FollowerStep, RoundTripsPrefillDecodeAndPrefixHits) {
  const FollowerStep plan = MixedPlan();
  const std::string bytes = EncodeFollowerStep(plan);
  ExpectEqual(DecodeFollowerStep(bytes), plan);
  // Compact: 16 bytes a token plus small headers.
  EXPECT_LT(bytes.size(), 16u * 10 + 4 * 20 + 4 * 11 + 4 * 4 + 64);
}

TEST(FollowerStep, RoundTripsAnEmptyStepAndDecodeOnly) {
  FollowerStep empty;
  empty.memory = {1, 1, 0};
  ExpectEqual(DecodeFollowerStep(EncodeFollowerStep(empty)), empty);
  FollowerStep decode;
  decode.memory = {4, 2, 0};
  decode.batch.token_ids = {7, 8};
  decode.batch.positions = {3, 0};
  decode.batch.kv_slots = {3, 4};
  decode.batch.sequences = {{0, 1, 3, {0, 1}}, {1, 1, 0, {2}}};
  decode.batch.logits_indices = {0, 1};
  ExpectEqual(DecodeFollowerStep(EncodeFollowerStep(decode)), decode);
}

TEST(FollowerStep, EveryTruncationIsRejected) {
  const std::string bytes = EncodeFollowerStep(MixedPlan());
  for (std::size_t n = 0; n < bytes.size(); ++n) EXPECT_NE(DecodeError(bytes.substr(0, n)), "") << n;
  EXPECT_THAT(DecodeError(bytes + "x"), HasSubstr("1 unexpected bytes after the plan"));
}

TEST(FollowerStep, BadHeaderIsRejected) {
  std::string bytes = EncodeFollowerStep(MixedPlan());
  EXPECT_THAT(DecodeError("JUNK"), HasSubstr("bad magic"));
  std::string v = bytes;
  v[4] = 9;
  EXPECT_THAT(DecodeError(v), HasSubstr("version 9"));
  // A huge token count must not allocate: checked against the bytes left.
  std::string huge = bytes;
  huge[32] = huge[33] = static_cast<char>(0x7F);  // the token count (bytes 30..33)
  EXPECT_THAT(DecodeError(huge), HasSubstr("follower step: the tokens needs"));
}

TEST(FollowerStep, IndicesOutsideWhatTheyIndexAreRejected) {
  auto error_of = [](auto mutate) {
    FollowerStep p = MixedPlan();
    mutate(p);
    return DecodeError(EncodeFollowerStep(p));
  };
  EXPECT_THAT(error_of([](FollowerStep& p) { p.batch.kv_slots[2] = 64; }), HasSubstr("writes slot 64 outside [0, 64)"));
  EXPECT_THAT(error_of([](FollowerStep& p) { p.batch.kv_slots[0] = -1; }), HasSubstr("writes slot -1"));
  EXPECT_THAT(error_of([](FollowerStep& p) { p.batch.sequences[1].block_table[0] = 16; }),
              HasSubstr("names page 16 outside [0, 16)"));
  EXPECT_THAT(error_of([](FollowerStep& p) { p.batch.sequences[0].block_table.pop_back(); }),
              HasSubstr("has 3 pages for 13 tokens"));
  EXPECT_THAT(error_of([](FollowerStep& p) { p.batch.sequences[2].query_start = 7; }), HasSubstr("sequence 2 has tokens"));
  EXPECT_THAT(error_of([](FollowerStep& p) { p.batch.sequences[3].query_len = 2; }), HasSubstr("sequence 3 has tokens"));
  EXPECT_THAT(error_of([](FollowerStep& p) { p.batch.sequences.pop_back(); }), HasSubstr("cover 9 of 10 tokens"));
  EXPECT_THAT(error_of([](FollowerStep& p) { p.batch.sequences[0].context_len = -1; }), HasSubstr("sequence 0"));
  EXPECT_THAT(error_of([](FollowerStep& p) { p.batch.logits_indices[1] = 10; }), HasSubstr("logits row 10 outside"));
  EXPECT_THAT(error_of([](FollowerStep& p) { p.batch.token_ids[0] = -5; }), HasSubstr("negative id"));
  EXPECT_THAT(error_of([](FollowerStep& p) { p.batch.positions[0] = -1; }), HasSubstr("negative position"));
  EXPECT_THAT(error_of([](FollowerStep& p) { p.memory.num_pages = 0; }), HasSubstr("bad memory geometry"));
  EXPECT_THAT(error_of([](FollowerStep& p) { p.memory.page_size = std::int64_t{1} << 40; }),
              HasSubstr("bad memory geometry"));
  EXPECT_THAT(error_of([](FollowerStep& p) { p.memory.num_state_slots = -1; }), HasSubstr("bad memory geometry"));
  EXPECT_THAT(error_of([](FollowerStep& p) { p.batch.sequences[1].state_slot = 6; }),
              HasSubstr("names state slot 6 outside [-1, 6)"));
}

TEST(FollowerStep, SingleByteCorruptionNeverCrashes) {
  // Every byte flipped in turn: either a valid plan or an Error, never anything else.
  const std::string bytes = EncodeFollowerStep(MixedPlan());
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
