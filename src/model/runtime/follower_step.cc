// Layout (all integers little-endian):
//   "FSPL" u16 version  i64 num_pages  i64 page_size  i64 num_state_slots
//   u32 num_tokens  i32 token_ids[n]  i32 positions[n]  i64 kv_slots[n]
//   u32 num_sequences  { i32 query_start  i32 query_len  i32 context_len  i32 state_slot
//                        u32 pages  i32 block_table[pages] }*
//   u32 num_logits  i32 logits_indices[m]
#include "model/runtime/follower_step.h"

#include <cstring>
#include <limits>

#include "base/error.h"

namespace fission::model {
namespace {

constexpr char kMagic[4] = {'F', 'S', 'P', 'L'};
// Pages × page size above this is not a cache any node could hold (and could overflow).
constexpr std::int64_t kMaxSlots = std::int64_t{1} << 40;

class Writer {
 public:
  template <typename T>
  void Put(T value) {
    using U = std::make_unsigned_t<T>;
    const U u = static_cast<U>(value);
    for (std::size_t i = 0; i < sizeof(T); ++i) out_.push_back(static_cast<char>((u >> (8 * i)) & 0xFF));
  }
  template <typename T>
  void PutArray(const std::vector<T>& values) {
    for (T v : values) Put(v);
  }
  std::string Take() { return std::move(out_); }
  std::string out_;
};

class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}
  template <typename T>
  T Get(const char* what) {
    Need(sizeof(T), 1, what);
    using U = std::make_unsigned_t<T>;
    U u = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) u |= static_cast<U>(static_cast<unsigned char>(bytes_[at_ + i])) << (8 * i);
    at_ += sizeof(T);
    return static_cast<T>(u);
  }
  // A count followed by that many values: the count is checked against the bytes left first.
  template <typename T>
  std::vector<T> GetArray(std::uint32_t count, const char* what) {
    Need(sizeof(T), count, what);
    std::vector<T> values(count);
    for (T& v : values) v = Get<T>(what);
    return values;
  }
  void Need(std::size_t size, std::uint64_t count, const char* what) const {
    if (count > (bytes_.size() - at_) / size)
      Fail("follower step: ", what, " needs ", count * size, " bytes at offset ", at_, " but ", bytes_.size() - at_,
           " are left");
  }
  void Magic() {
    if (bytes_.size() < sizeof(kMagic) || std::memcmp(bytes_.data(), kMagic, sizeof(kMagic)) != 0)
      Fail("follower step: bad magic (not a follower step)");
    at_ = sizeof(kMagic);
  }
  void End() const {
    if (at_ != bytes_.size()) Fail("follower step: ", bytes_.size() - at_, " unexpected bytes after the plan");
  }

 private:
  std::string_view bytes_;
  std::size_t at_ = 0;
};

// Every index within what it indexes; sequences tile the token stream in order.
void Validate(const FollowerStep& plan) {
  const ForwardBatch& b = plan.batch;
  const MemoryPlan& m = plan.memory;
  if (m.num_pages < 1 || m.page_size < 1 || m.num_pages > kMaxSlots / m.page_size || m.num_state_slots < 0 ||
      m.num_state_slots > kMaxSlots)
    Fail("follower step: bad memory geometry ", m.num_pages, " pages of ", m.page_size, " and ", m.num_state_slots,
         " state slots");
  const std::int64_t slots = m.num_pages * m.page_size;
  const std::int64_t n = b.num_tokens();
  for (std::int64_t i = 0; i < n; ++i) {
    if (b.token_ids[i] < 0) Fail("follower step: token ", i, " has a negative id ", b.token_ids[i]);
    if (b.positions[i] < 0) Fail("follower step: token ", i, " has a negative position ", b.positions[i]);
    if (b.kv_slots[i] < 0 || b.kv_slots[i] >= slots)
      Fail("follower step: token ", i, " writes slot ", b.kv_slots[i], " outside [0, ", slots, ")");
  }
  std::int64_t next = 0;
  for (std::size_t s = 0; s < b.sequences.size(); ++s) {
    const SequenceSlice& q = b.sequences[s];
    if (q.query_start != next || q.query_len < 0 || q.context_len < 0 ||
        static_cast<std::int64_t>(q.query_start) + q.query_len > n)
      Fail("follower step: sequence ", s, " has tokens [", q.query_start, ", +", q.query_len, ") where [", next,
           ", ...) of ", n, " tokens was due");
    next = q.query_start + q.query_len;
    const std::int64_t kv_len = static_cast<std::int64_t>(q.context_len) + q.query_len;
    if (static_cast<std::int64_t>(q.block_table.size()) * m.page_size < kv_len)
      Fail("follower step: sequence ", s, " has ", q.block_table.size(), " pages for ", kv_len, " tokens");
    for (std::int32_t page : q.block_table)
      if (page < 0 || page >= m.num_pages)
        Fail("follower step: sequence ", s, " names page ", page, " outside [0, ", m.num_pages, ")");
    if (q.state_slot < -1 || q.state_slot >= m.num_state_slots)
      Fail("follower step: sequence ", s, " names state slot ", q.state_slot, " outside [-1, ", m.num_state_slots, ")");
  }
  if (next != n) Fail("follower step: the sequences cover ", next, " of ", n, " tokens");
  for (std::int32_t row : b.logits_indices)
    if (row < 0 || row >= n) Fail("follower step: logits row ", row, " outside [0, ", n, ")");
}

}  // namespace

std::string EncodeFollowerStep(const FollowerStep& plan) {
  const ForwardBatch& b = plan.batch;
  FISSION_CHECK(b.positions.size() == b.token_ids.size() && b.kv_slots.size() == b.token_ids.size());
  Writer w;
  w.out_.append(kMagic, sizeof(kMagic));
  w.Put<std::uint16_t>(kFollowerStepVersion);
  w.Put<std::int64_t>(plan.memory.num_pages);
  w.Put<std::int64_t>(plan.memory.page_size);
  w.Put<std::int64_t>(plan.memory.num_state_slots);
  w.Put<std::uint32_t>(static_cast<std::uint32_t>(b.token_ids.size()));
  w.PutArray(b.token_ids);
  w.PutArray(b.positions);
  w.PutArray(b.kv_slots);
  w.Put<std::uint32_t>(static_cast<std::uint32_t>(b.sequences.size()));
  for (const SequenceSlice& s : b.sequences) {
    w.Put<std::int32_t>(s.query_start);
    w.Put<std::int32_t>(s.query_len);
    w.Put<std::int32_t>(s.context_len);
    w.Put<std::int32_t>(s.state_slot);
    w.Put<std::uint32_t>(static_cast<std::uint32_t>(s.block_table.size()));
    w.PutArray(s.block_table);
  }
  w.Put<std::uint32_t>(static_cast<std::uint32_t>(b.logits_indices.size()));
  w.PutArray(b.logits_indices);
  return w.Take();
}

FollowerStep DecodeFollowerStep(std::string_view bytes) {
  Reader r(bytes);
  r.Magic();
  const std::uint16_t version = r.Get<std::uint16_t>("the version");
  if (version != kFollowerStepVersion)
    Fail("follower step: version ", version, " (this build reads version ", kFollowerStepVersion,
         "; run the same build on every node)");
  FollowerStep plan;
  plan.memory.num_pages = r.Get<std::int64_t>("the page count");
  plan.memory.page_size = r.Get<std::int64_t>("the page size");
  plan.memory.num_state_slots = r.Get<std::int64_t>("the state-slot count");
  ForwardBatch& b = plan.batch;
  const std::uint32_t n = r.Get<std::uint32_t>("the token count");
  if (n > static_cast<std::uint32_t>(std::numeric_limits<std::int32_t>::max())) Fail("follower step: ", n, " tokens");
  // Each token takes 16 bytes; check them all before allocating any.
  r.Need(16, n, "the tokens");
  b.token_ids = r.GetArray<std::int32_t>(n, "the token ids");
  b.positions = r.GetArray<std::int32_t>(n, "the positions");
  b.kv_slots = r.GetArray<std::int64_t>(n, "the KV slots");
  const std::uint32_t sequences = r.Get<std::uint32_t>("the sequence count");
  r.Need(20, sequences, "the sequences");
  b.sequences.resize(sequences);
  for (SequenceSlice& s : b.sequences) {
    s.query_start = r.Get<std::int32_t>("a query start");
    s.query_len = r.Get<std::int32_t>("a query length");
    s.context_len = r.Get<std::int32_t>("a context length");
    s.state_slot = r.Get<std::int32_t>("a state slot");
    s.block_table = r.GetArray<std::int32_t>(r.Get<std::uint32_t>("a block-table length"), "a block table");
  }
  b.logits_indices = r.GetArray<std::int32_t>(r.Get<std::uint32_t>("the logits count"), "the logits rows");
  r.End();
  Validate(plan);
  return plan;
}

}  // namespace fission::model
