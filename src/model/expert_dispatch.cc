// TokenLayout::ExpertParallel lives here with the plan it carries out (token_layout.cc holds the
// other transitions).
#include "model/expert_dispatch.h"

#include <algorithm>
#include <numeric>

#include "base/error.h"
#include "model/step_inputs.h"
#include "model/token_layout.h"

namespace fission::model {

ExpertDispatch PlanExpertDispatch(std::span<const std::int32_t> ids, std::span<const float> weights,
                                  std::int64_t tokens, int top_k, int num_experts, int ep_size, int moe_tp) {
  FISSION_CHECK(num_experts % ep_size == 0, "experts ", num_experts, " over ", ep_size, " EP ranks");
  FISSION_CHECK(static_cast<std::int64_t>(ids.size()) == tokens * top_k && ids.size() == weights.size());
  const int world = ep_size * moe_tp, per_rank = num_experts / ep_size;
  ExpertDispatch d;
  d.send_rows.assign(world, 0);
  // Each token's slots in ascending expert order: the order the single-rank experts are summed in.
  std::vector<std::int32_t> slots(ids.size());
  for (std::int64_t i = 0; i < tokens; ++i) {
    const auto first = slots.begin() + i * top_k;
    std::iota(first, first + top_k, static_cast<std::int32_t>(i * top_k));
    std::sort(first, first + top_k, [&](std::int32_t a, std::int32_t b) { return ids[a] < ids[b]; });
  }
  for (std::int32_t e : ids) {
    FISSION_CHECK(e >= 0 && e < num_experts, "routed expert ", e, " of ", num_experts);
    for (int t = 0; t < moe_tp; ++t) ++d.send_rows[e / per_rank * moe_tp + t];
  }
  std::vector<std::int64_t> cursor(world, 0);
  for (int r = 1; r < world; ++r) cursor[r] = cursor[r - 1] + d.send_rows[r - 1];
  const std::int64_t sent = cursor.back() + d.send_rows.back();
  d.send_index.resize(sent);
  d.send_meta.resize(2 * sent);
  d.combine.assign(static_cast<std::size_t>(top_k) * moe_tp, std::vector<std::int32_t>(tokens));
  for (std::int64_t i = 0; i < tokens; ++i) {
    for (int j = 0; j < top_k; ++j) {
      const std::int32_t slot = slots[i * top_k + j], e = ids[slot];
      const int p = e / per_rank;
      for (int t = 0; t < moe_tp; ++t) {
        const std::int64_t at = cursor[p * moe_tp + t]++;
        d.send_index[at] = static_cast<std::int32_t>(i);
        d.send_meta[2 * at] = static_cast<float>(e - p * per_rank);
        d.send_meta[2 * at + 1] = weights[slot];
        d.combine[j * moe_tp + t][i] = static_cast<std::int32_t>(at);
      }
    }
  }
  return d;
}

namespace {

std::vector<std::int32_t> FirstRows(std::int64_t n) {
  std::vector<std::int32_t> rows(static_cast<std::size_t>(n));
  std::iota(rows.begin(), rows.end(), 0);
  return rows;
}

std::vector<std::int64_t> Scaled(const std::vector<std::int64_t>& rows, std::int64_t width) {
  std::vector<std::int64_t> out(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) out[i] = rows[i] * width;
  return out;
}

}  // namespace

void TokenLayout::ExpertParallel(const Tensor& x, const Tensor& out, const ExpertParallelMoe& moe) const {
  const std::int64_t hidden = x.shape[1];
  const int world = rank_.world_size(), me = rank_.world_rank();
  const int attn_tp = rank_.attn_tp_size(), cp = step_.split() ? 1 : rank_.cp_size();
  // The ranks that hold these same rows (the attention-TP group, and the CP group too when the
  // step is not split) each take a consecutive share of the real ones.
  const int sharers = attn_tp * cp;
  const int share = (step_.split() ? 0 : rank_.cp_rank() * attn_tp) + rank_.attn_tp_rank();
  const std::int64_t real = step_.real_rows;
  const std::int64_t chunk = std::max<std::int64_t>(1, (real + sharers - 1) / sharers);
  const std::int64_t begin = std::min(real, share * chunk), end = std::min(real, begin + chunk), s = end - begin;
  const Tensor src = x.Rows(begin, end);
  Allocator* alloc = b_.allocator();

  std::vector<std::int32_t> ids(static_cast<std::size_t>(s * moe.top_k));
  std::vector<float> weights(ids.size());
  if (s > 0) {
    Buffer ids_d(DType::kI32, Shape{s, moe.top_k}, alloc), weights_d(DType::kF32, Shape{s, moe.top_k}, alloc);
    moe.route(src, ids_d, weights_d);
    b_.CopyBytesToHost(ids_d, ids.data());
    b_.CopyToHost(weights_d, weights.data());
  }
  const ExpertDispatch plan =
      PlanExpertDispatch(ids, weights, s, moe.top_k, moe.num_experts, rank_.ep_size(), rank_.moe_tp_size());

  // Every rank's send counts, so each knows what it receives (and the world's load).
  std::vector<float> counts(plan.send_rows.begin(), plan.send_rows.end()), matrix(world * world);
  Buffer counts_d(DType::kF32, Shape{world}, alloc), matrix_d(DType::kF32, Shape{world * world}, alloc);
  b_.CopyFromHost(counts.data(), counts_d);
  rank_.groups->world->AllGather(counts_d, matrix_d);
  b_.CopyToHost(matrix_d, matrix.data());
  std::vector<std::int64_t> recv_rows(world);
  for (int p = 0; p < world; ++p) recv_rows[p] = static_cast<std::int64_t>(matrix[p * world + me]);
  if (load_ != nullptr) {
    const int moe_tp = rank_.moe_tp_size();
    for (int q = 0; q < rank_.ep_size(); ++q) {
      std::int64_t pairs = 0;
      for (int p = 0; p < world; ++p) pairs += static_cast<std::int64_t>(matrix[p * world + q * moe_tp]);
      load_->Add(q, pairs, rank_.ep_size());
    }
  }
  const std::int64_t sent = static_cast<std::int64_t>(plan.send_index.size());
  const std::int64_t received = std::accumulate(recv_rows.begin(), recv_rows.end(), std::int64_t{0});

  // Dispatch the rows and their (expert, weight), run the local experts, send the results back.
  Buffer send_x(DType::kF32, Shape{std::max<std::int64_t>(sent, 1), hidden}, alloc);
  Buffer send_meta(DType::kF32, Shape{std::max<std::int64_t>(sent, 1), 2}, alloc);
  if (sent > 0) {
    b_.GatherRows(src, plan.send_index, send_x.tensor().Rows(0, sent));
    b_.CopyFromHost(plan.send_meta.data(), send_meta.tensor().Rows(0, sent));
  }
  Buffer recv_x(DType::kF32, Shape{std::max<std::int64_t>(received, 1), hidden}, alloc);
  Buffer recv_meta(DType::kF32, Shape{std::max<std::int64_t>(received, 1), 2}, alloc);
  rank_.groups->world->AllToAllV(send_x, Scaled(plan.send_rows, hidden), recv_x, Scaled(recv_rows, hidden));
  rank_.groups->world->AllToAllV(send_meta, Scaled(plan.send_rows, 2), recv_meta, Scaled(recv_rows, 2));
  Buffer results(DType::kF32, recv_x.tensor().shape, alloc);
  if (received > 0) {
    std::vector<float> meta(static_cast<std::size_t>(2 * received));
    b_.CopyToHost(recv_meta.tensor().Rows(0, received), meta.data());
    std::vector<std::int32_t> local(static_cast<std::size_t>(received));
    std::vector<float> w(local.size());
    for (std::int64_t i = 0; i < received; ++i) {
      local[i] = static_cast<std::int32_t>(meta[2 * i]);
      w[i] = meta[2 * i + 1];
    }
    Buffer local_d(DType::kI32, Shape{received, 1}, alloc), w_d(DType::kF32, Shape{received, 1}, alloc);
    b_.CopyBytesFromHost(local.data(), local_d);
    b_.CopyFromHost(w.data(), w_d);
    moe.experts(recv_x.tensor().Rows(0, received), local_d, w_d, results.tensor().Rows(0, received));
  }
  Buffer back(DType::kF32, send_x.tensor().shape, alloc);
  rank_.groups->world->AllToAllV(results, Scaled(recv_rows, hidden), back, Scaled(plan.send_rows, hidden));

  // Each token's partial results in ascending expert order, then its shared experts.
  Buffer mine(DType::kF32, Shape{chunk, hidden}, alloc);
  b_.Zero(mine);
  if (s > 0) {
    const Tensor acc = mine.tensor().Rows(0, s);
    Buffer part(DType::kF32, Shape{s, hidden}, alloc);
    for (const std::vector<std::int32_t>& rows : plan.combine) {
      b_.GatherRows(back, rows, part);
      b_.Add(acc, part, acc);
    }
    if (moe.add_shared) moe.add_shared(src, acc);
  }
  // Every sharer's results, in row order, become every sharer's rows.
  Buffer gathered = std::move(mine);
  if (attn_tp > 1) {
    Buffer g(DType::kF32, Shape{attn_tp * chunk, hidden}, alloc);
    rank_.groups->attn_tp->AllGather(gathered, g);
    gathered = std::move(g);
  }
  if (cp > 1) {
    Buffer g(DType::kF32, Shape{cp * attn_tp * chunk, hidden}, alloc);
    rank_.groups->cp->AllGather(gathered, g);
    gathered = std::move(g);
  }
  b_.Zero(out);
  if (real > 0) b_.GatherRows(gathered, FirstRows(real), out.Rows(0, real));
}

}  // namespace fission::model
