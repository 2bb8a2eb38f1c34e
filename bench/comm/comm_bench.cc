// Communication time per layer of the prefill benchmark's layouts (a measurement, not a test): the
// collectives one DeepSeek-V3 layer issues for an n-token prefill step, timed alone on the GPUs of
// this process with the same NcclWorld the model uses. Activations are fp32, as in the model.
//   --tp-size W (no context parallelism): all-reduce of the attention output [n, hidden] over the
//     attention-TP group and of the feed-forward partial sums [n, hidden] over the world;
//   --tp-size W --attn-cp-size C: all-gather of the new latent rows [n/C, kv_lora + rope] and of
//     the hidden states [n/C, hidden] over the CP group, then the world all-reduce [n, hidden]
//     (attention-TP all-reduces too when W/C > 1).
// Each collective runs `kReps` times after warm-up on every rank's stream; rank 0's CUDA events
// give the median. Prints one line per (tokens, layout, collective) and the per-layer total.
//
//   usage: fission_comm_bench [TP] [CP] [TOKENS...]   (default 2 2 8192 16384 32768 61440)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "comm/nccl/nccl_communicator.h"
#include "tensor/tensor.h"

namespace {

using fission::DType;
using fission::Shape;
using fission::Tensor;
using fission::comm::ProcessGroups;

constexpr std::int64_t kHidden = 7168;
constexpr std::int64_t kLatent = 576;
constexpr int kWarmup = 3;
constexpr int kReps = 15;

void Check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

Tensor DeviceTensor(std::int64_t rows, std::int64_t cols) {
  void* p = nullptr;
  Check(cudaMalloc(&p, static_cast<std::size_t>(rows * cols) * sizeof(float)), "cudaMalloc");
  Check(cudaMemset(p, 0, static_cast<std::size_t>(rows * cols) * sizeof(float)), "cudaMemset");
  return Tensor{p, DType::kF32, Shape{rows, cols}, fission::Device::Cuda(0)};
}

// One collective of a layer: what it is called and what it does on a rank.
struct Collective {
  std::string name;
  std::int64_t bytes;  // of the full result on one rank
  std::function<void(const ProcessGroups&)> run;
};

// The collectives of one layer for `tokens` prefill tokens under the layout of `groups`, with the
// buffers of rank `rank` (allocated on the current device).
std::vector<Collective> LayerCollectives(const ProcessGroups& g, std::int64_t tokens) {
  std::vector<Collective> out;
  const std::int64_t owned = (tokens + g.cp_size - 1) / g.cp_size;
  const std::int64_t rows = owned * g.cp_size;
  if (g.cp_size > 1) {
    Tensor latent = DeviceTensor(owned, kLatent), latent_all = DeviceTensor(rows, kLatent);
    out.push_back({"cp all-gather latent", rows * kLatent * 4,
                   [=](const ProcessGroups& p) { p.cp->AllGather(latent, latent_all); }});
  }
  if (g.attn_tp_size > 1) {
    Tensor attn = DeviceTensor(owned, kHidden);
    out.push_back({"attn-tp all-reduce", owned * kHidden * 4,
                   [=](const ProcessGroups& p) { p.attn_tp->AllReduceSum(attn); }});
  }
  if (g.cp_size > 1) {
    Tensor h = DeviceTensor(owned, kHidden), h_all = DeviceTensor(rows, kHidden);
    out.push_back({"cp all-gather hidden", rows * kHidden * 4,
                   [=](const ProcessGroups& p) { p.cp->AllGather(h, h_all); }});
  }
  if (g.world_size > 1) {
    Tensor ffn = DeviceTensor(rows, kHidden);
    out.push_back({"world all-reduce", rows * kHidden * 4,
                   [=](const ProcessGroups& p) { p.world->AllReduceSum(ffn); }});
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const int tp = argc > 1 ? std::atoi(argv[1]) : 2;
  const int cp = argc > 2 ? std::atoi(argv[2]) : 2;
  std::vector<std::int64_t> token_counts;
  for (int i = 3; i < argc; ++i) token_counts.push_back(std::atoll(argv[i]));
  if (token_counts.empty()) token_counts = {8192, 16384, 32768, 61440};
  int devices = 0;
  Check(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
  if (devices < tp) {
    std::printf("comm bench: --tp-size %d needs %d GPUs, this host has %d\n", tp, tp, devices);
    return 0;
  }
  std::vector<int> device_ids(tp);
  std::vector<cudaStream_t> streams(tp);
  for (int r = 0; r < tp; ++r) {
    device_ids[r] = r;
    Check(cudaSetDevice(r), "cudaSetDevice");
    Check(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking), "cudaStreamCreate");
  }
  fission::comm::NcclWorld world(fission::comm::LayoutSizes{tp, cp}, device_ids, streams);
  for (const std::int64_t tokens : token_counts) {
    // Every rank builds its buffers on its own device, then all run each collective in lockstep.
    std::vector<std::vector<Collective>> per_rank(tp);
    for (int r = 0; r < tp; ++r) {
      Check(cudaSetDevice(r), "cudaSetDevice");
      per_rank[r] = LayerCollectives(world.Groups(r), tokens);
    }
    double layer_ms = 0;
    for (std::size_t c = 0; c < per_rank[0].size(); ++c) {
      std::vector<float> times;
      std::vector<std::thread> threads;
      for (int r = 0; r < tp; ++r) {
        threads.emplace_back([&, r] {
          Check(cudaSetDevice(r), "cudaSetDevice");
          cudaEvent_t start, stop;
          Check(cudaEventCreate(&start), "event");
          Check(cudaEventCreate(&stop), "event");
          for (int i = 0; i < kWarmup + kReps; ++i) {
            world.Groups(r).world->Barrier();
            Check(cudaEventRecord(start, streams[r]), "record");
            per_rank[r][c].run(world.Groups(r));
            Check(cudaEventRecord(stop, streams[r]), "record");
            Check(cudaEventSynchronize(stop), "sync");
            float ms = 0;
            Check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
            if (r == 0 && i >= kWarmup) times.push_back(ms);
          }
        });
      }
      for (std::thread& t : threads) t.join();
      std::sort(times.begin(), times.end());
      const double median = times[times.size() / 2];
      layer_ms += median;
      std::printf("tokens %lld | tp %d cp %d | %-22s | %8.1f MB | %8.3f ms | %7.1f GB/s\n",
                  static_cast<long long>(tokens), tp, cp, per_rank[0][c].name.c_str(),
                  per_rank[0][c].bytes / 1e6, median, per_rank[0][c].bytes / 1e6 / median);
    }
    std::printf("tokens %lld | tp %d cp %d | per layer total %.3f ms\n", static_cast<long long>(tokens), tp, cp,
                layer_ms);
    std::fflush(stdout);
  }
  return 0;
}
