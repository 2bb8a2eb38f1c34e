// A paged batch for the DeepSeek Sparse Attention tests (dsa_indexer_test.cc,
// dsa_sparse_mla_test.cc): sequences with cached context and new query rows, their pages drawn in
// a shuffled order from a pool with spare pages nobody owns, and optionally rows at the end of the
// batch that belong to no sequence (an operation must leave them as they are).
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <span>
#include <vector>

#include "kernels/mla_ops.h"

namespace fission::kernels::cuda::testing {

// A sequence's new tokens follow context_len cached ones; with stride > 1 only every stride-th of
// them is in the step (a context-parallel rank's share), so query positions are not consecutive.
struct DsaSeqSpec {
  int context_len, query_len;
  int stride = 1;
};

struct PagedBatch {
  std::int64_t n = 0, pages = 0, page = 0, spare_rows = 0;
  std::vector<std::vector<std::int32_t>> tables, positions;
  std::vector<SeqAttention> seqs;

  static int KvLen(const DsaSeqSpec& s) { return s.context_len + (s.query_len - 1) * s.stride + 1; }

  PagedBatch(const std::vector<DsaSeqSpec>& specs, std::int64_t page_size, std::mt19937& rng,
             std::int64_t rows_outside = 0)
      : page(page_size), spare_rows(rows_outside) {
    std::int64_t need = 0;
    for (const DsaSeqSpec& s : specs) need += (KvLen(s) + page - 1) / page;
    pages = need + 3;
    std::vector<std::int32_t> order(pages);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    std::int64_t next = 0;
    for (const DsaSeqSpec& s : specs) {
      const std::int64_t np = (KvLen(s) + page - 1) / page;
      tables.emplace_back(order.begin() + next, order.begin() + next + np);
      next += np;
      std::vector<std::int32_t> pos(s.query_len);
      for (int t = 0; t < s.query_len; ++t) pos[t] = s.context_len + t * s.stride;
      positions.push_back(pos);
      seqs.push_back({static_cast<std::int32_t>(n), s.query_len, KvLen(s), {}, {}});
      n += s.query_len;
    }
    for (std::size_t i = 0; i < seqs.size(); ++i) {
      seqs[i].block_table = tables[i];
      seqs[i].query_positions = positions[i];
      seqs[i].decode = specs[i].query_len == 1;
    }
    n += rows_outside;
  }
  std::int64_t slots() const { return pages * page; }
  std::int64_t Slot(std::size_t seq, std::int64_t position) const {
    return static_cast<std::int64_t>(tables[seq][position / page]) * page + position % page;
  }

  // A pure decode step's layout in a graph's input block: all positions, then every table padded
  // with page 0 to the widest, each sequence's part at a fixed stride (one array).
  std::vector<std::int32_t> block;
  std::int64_t table_width = 0;
  void MakeContiguous(std::int64_t width = 0) {
    table_width = width;
    for (const auto& t : tables) table_width = std::max<std::int64_t>(table_width, t.size());
    const std::size_t count = seqs.size();
    block.assign(n + count * table_width, 0);
    std::int64_t at = 0;
    for (std::size_t i = 0; i < count; ++i) {
      std::copy(positions[i].begin(), positions[i].end(), block.begin() + at);
      seqs[i].query_positions = std::span<const std::int32_t>(block.data() + at, positions[i].size());
      at += static_cast<std::int64_t>(positions[i].size());
    }
    for (std::size_t i = 0; i < count; ++i) {
      std::int32_t* table = block.data() + n + i * table_width;
      std::copy(tables[i].begin(), tables[i].end(), table);
      seqs[i].block_table = std::span<const std::int32_t>(table, table_width);
    }
  }
  // Each decoding sequence one token further (its pages already hold the token: tests leave room).
  void Advance() {
    for (std::size_t i = 0; i < seqs.size(); ++i) {
      ++seqs[i].kv_len;
      ++block[seqs[i].query_positions.data() - block.data()];
      ++positions[i][0];
    }
  }
};

}  // namespace fission::kernels::cuda::testing
