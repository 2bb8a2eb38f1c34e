#include "kernels/cuda/op_timer.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_context.h"

namespace fission::kernels::cuda {
namespace {

bool Enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("FISSION_CUDA_OP_TIMING");
    return v != nullptr && *v != '\0' && std::string(v) != "0";
  }();
  return enabled;
}

struct Totals {
  double seconds = 0;
  std::int64_t calls = 0;
};

// The per-process table; printed when the process exits.
class Table {
 public:
  void Add(const std::string& key, double seconds) {
    std::lock_guard<std::mutex> lock(mu_);
    Totals& t = totals_[key];
    t.seconds += seconds;
    ++t.calls;
  }
  ~Table() {
    if (totals_.empty()) return;
    std::vector<std::pair<std::string, Totals>> rows(totals_.begin(), totals_.end());
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
    double all = 0;
    for (const auto& [key, t] : rows) all += t.seconds;
    std::fprintf(stderr, "CUDA op timing (FISSION_CUDA_OP_TIMING): %.3f s in %zu kinds\n", all, rows.size());
    for (const auto& [key, t] : rows)
      std::fprintf(stderr, "  %-34s %9.3f ms %6.1f%% %8lld calls %9.1f us/call\n", key.c_str(), t.seconds * 1e3,
                   100.0 * t.seconds / all, static_cast<long long>(t.calls), t.seconds * 1e6 / t.calls);
  }

 private:
  std::mutex mu_;
  std::map<std::string, Totals> totals_;
};

Table& TheTable() {
  static Table table;
  return table;
}

}  // namespace

OpTimer::OpTimer(CudaContext& ctx, const char* op, std::int64_t rows, const Shape& weight)
    : OpTimer(ctx, op, rows) {
  if (ctx_ != nullptr) op_ += " " + weight.ToString();
}

OpTimer::OpTimer(CudaContext& ctx, const char* op, std::int64_t rows) : rows_(rows) {
  if (!Enabled() || ctx.capturing()) return;  // a captured stream cannot be waited for
  op_ = op;
  TheTable();  // constructed before first use, so destroyed after every timer
  ctx_ = &ctx;
  FISSION_CUDA(cudaStreamSynchronize(ctx.stream()));
  start_ = std::chrono::steady_clock::now();
}

OpTimer::~OpTimer() {
  if (ctx_ == nullptr) return;
  if (cudaStreamSynchronize(ctx_->stream()) != cudaSuccess) return;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  TheTable().Add(op_ + (rows_ <= 64 ? " [<=64 rows]" : " [>64 rows]"), seconds);
}

}  // namespace fission::kernels::cuda
