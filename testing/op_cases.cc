#include "testing/op_cases.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "base/error.h"

namespace fission::testing {
namespace {

using kernels::Backend;

template <typename T>
HostTensor Make(DType dtype, Shape shape, const std::vector<T>& values) {
  HostTensor t;
  t.dtype = dtype;
  t.shape = shape;
  FISSION_CHECK(static_cast<std::int64_t>(values.size()) == shape.numel(), "values for ", shape.ToString());
  t.bytes.resize(values.size() * sizeof(T));
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

std::vector<float> Uniform(std::mt19937_64& rng, std::int64_t n, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

HostTensor RandomF32(std::mt19937_64& rng, Shape shape, float lo = -1.0f, float hi = 1.0f) {
  return HostTensor::F32(shape, Uniform(rng, shape.numel(), lo, hi));
}

// e4m3 codes of uniform values over ±448, and fp32 block scales.
HostTensor RandomE4M3(std::mt19937_64& rng, Shape shape) {
  const std::vector<float> values = Uniform(rng, shape.numel(), -448.0f, 448.0f);
  HostTensor t;
  t.dtype = DType::kF8E4M3;
  t.shape = shape;
  t.bytes.resize(values.size());
  ConvertFromF32(DType::kF8E4M3, values.data(), t.bytes.data(), shape.numel());
  return t;
}

std::int64_t Blocks(std::int64_t n) { return (n + 127) / 128; }

// Device (or host) copies of inputs, and results back.
Buffer ToBackend(Backend& b, const HostTensor& t) {
  Buffer buf(t.dtype, t.shape, b.allocator());
  b.CopyBytesFromHost(t.bytes.data(), buf);
  return buf;
}

HostTensor FromBackend(Backend& b, const Tensor& t) {
  HostTensor out;
  out.dtype = t.dtype;
  out.shape = t.shape;
  out.bytes.resize(t.bytes());
  b.CopyBytesToHost(t, out.bytes.data());
  return out;
}

// The inputs of a case on a backend (copied there when the case is prepared), by name.
class OnBackend {
 public:
  OnBackend(Backend& b, const Tensors& inputs) : b_(b), inputs_(inputs) {
    for (const auto& [name, t] : inputs_) buffers_.emplace(name, ToBackend(b_, t));
  }
  Backend& backend() const { return b_; }
  const Tensor& operator[](const std::string& name) const { return buffers_.at(name).tensor(); }
  float scalar(const std::string& name) const { return inputs_.at(name).Floats()[0]; }
  std::int32_t integer(const std::string& name) const { return inputs_.at(name).data<std::int32_t>()[0]; }
  const Shape& shape(const std::string& name) const { return inputs_.at(name).shape; }
  // Host metadata (ids, positions, tables) stays on the host, as operations take it.
  template <typename T>
  std::span<const T> span(const std::string& name) const {
    const HostTensor& t = inputs_.at(name);
    return {t.data<T>(), static_cast<std::size_t>(t.numel())};
  }

 private:
  Backend& b_;
  Tensors inputs_;
  std::map<std::string, Buffer> buffers_;
};

// Builds a PreparedCase: the inputs on the backend, the outputs it allocates (or inputs the
// operation writes in place), and the launch.
class Prep {
 public:
  Prep(Backend& b, const Tensors& inputs) : in_(std::make_shared<OnBackend>(b, inputs)) {}
  OnBackend& in() { return *in_; }
  Tensor Output(const std::string& name, DType dtype, Shape shape) {
    auto buffer = std::make_shared<Buffer>(dtype, shape, in_->backend().allocator());
    outputs_.emplace_back(name, buffer);
    return buffer->tensor();
  }
  void InPlace(const std::string& output, const std::string& input) { in_place_.emplace_back(output, input); }
  PreparedCase Done(std::function<void(const OnBackend&)> launch) {
    auto in = in_;
    auto outputs = outputs_;
    auto in_place = in_place_;
    PreparedCase p;
    p.launch = [in, launch] { launch(*in); };
    p.collect = [in, outputs, in_place] {
      Tensors out;
      for (const auto& [name, buffer] : outputs) out[name] = FromBackend(in->backend(), buffer->tensor());
      for (const auto& [name, input] : in_place) out[name] = FromBackend(in->backend(), (*in)[input]);
      return out;
    };
    return p;
  }

 private:
  std::shared_ptr<OnBackend> in_;
  std::vector<std::pair<std::string, std::shared_ptr<Buffer>>> outputs_;
  std::vector<std::pair<std::string, std::string>> in_place_;
};

double Bytes(const Tensors& t) {
  double n = 0;
  for (const auto& [name, tensor] : t) n += static_cast<double>(tensor.bytes.size());
  return n;
}

// Cases -----------------------------------------------------------------------------------------

OpCase LinearF32() {
  OpCase c{"linear_f32", "Linear", {}, {}, {{"*", 1e-5}}, {}, {}, {}};
  c.inputs = [](std::mt19937_64& rng, int s) {
    return Tensors{{"x", RandomF32(rng, Shape{5 * s, 64 * s})}, {"w", RandomF32(rng, Shape{48 * s, 64 * s})}};
  };
  c.prepare = [](Backend& b, const Tensors& in) {
    Prep p(b, in);
    const Tensor out = p.Output("out", DType::kF32, Shape{in.at("x").shape[0], in.at("w").shape[0]});
    return p.Done([out](const OnBackend& d) { d.backend().Linear(d["x"], d["w"], out); });
  };
  c.flops = [](const Tensors& in) {
    return 2.0 * in.at("x").shape[0] * in.at("w").shape[0] * in.at("w").shape[1];
  };
  return c;
}

OpCase LinearFp8() {
  OpCase c{"linear_fp8", "Linear (e4m3, 128x128 fp32 scales)", {}, {}, {{"*", 1e-5}}, {}, {}, {}};
  c.inputs = [](std::mt19937_64& rng, int s) {
    const std::int64_t n = 3 * s, k = 256 * s, m = 160 * s;
    return Tensors{{"x", RandomF32(rng, Shape{n, k})},
                   {"w", RandomE4M3(rng, Shape{m, k})},
                   {"w_scale", RandomF32(rng, Shape{Blocks(m), Blocks(k)}, 1e-4f, 3e-4f)}};
  };
  c.prepare = [](Backend& b, const Tensors& in) {
    Prep p(b, in);
    const Tensor out = p.Output("out", DType::kF32, Shape{in.at("x").shape[0], in.at("w").shape[0]});
    return p.Done([out](const OnBackend& d) {
      d.backend().Linear(d["x"], WeightView(d["w"], d["w_scale"], WeightFormat::Fp8Block128()), out);
    });
  };
  c.flops = [](const Tensors& in) {
    return 2.0 * in.at("x").shape[0] * in.at("w").shape[0] * in.at("w").shape[1];
  };
  return c;
}

OpCase EmbeddingCase() {
  OpCase c{"embedding", "Embedding", {}, {}, {{"*", 0.0}}, {}, {}, {}};
  c.inputs = [](std::mt19937_64& rng, int s) {
    std::vector<std::int32_t> ids(7 * s);
    std::uniform_int_distribution<std::int32_t> id(0, 27);  // rows 4..23 exist: some ids fall outside
    for (auto& v : ids) v = id(rng);
    return Tensors{{"table", RandomF32(rng, Shape{20, 16 * s})},
                   {"ids", HostTensor::I32(Shape{7 * s}, ids)},
                   {"vocab_start", HostTensor::I32(Shape{1}, {4})}};
  };
  c.prepare = [](Backend& b, const Tensors& in) {
    Prep p(b, in);
    const Tensor out = p.Output("out", DType::kF32, Shape{in.at("ids").numel(), in.at("table").shape[1]});
    return p.Done([out](const OnBackend& d) {
      d.backend().Embedding(d["table"], d.span<std::int32_t>("ids"), d.integer("vocab_start"), out);
    });
  };
  return c;
}

OpCase ZeroCase() {
  OpCase c{"zero", "Zero", {}, {}, {{"*", 0.0}}, {}, {}, {}};
  c.inputs = [](std::mt19937_64& rng, int s) { return Tensors{{"x", RandomF32(rng, Shape{3 * s, 40})}}; };
  c.prepare = [](Backend& b, const Tensors& in) {
    Prep p(b, in);
    p.InPlace("out", "x");
    return p.Done([](const OnBackend& d) { d.backend().Zero(d["x"]); });
  };
  return c;
}

OpCase RmsNormCase() {
  OpCase c{"rms_norm", "RmsNorm (the first 16 of 24 values)", {}, {}, {{"*", 1e-6}}, {}, {}, {}};
  c.inputs = [](std::mt19937_64& rng, int s) {
    return Tensors{{"x", RandomF32(rng, Shape{6 * s, 24})},
                   {"weight", RandomF32(rng, Shape{16}, 0.5f, 1.5f)},
                   {"eps", HostTensor::F32(Shape{1}, {1e-6f})}};
  };
  c.prepare = [](Backend& b, const Tensors& in) {
    Prep p(b, in);
    const Tensor out = p.Output("out", DType::kF32, in.at("x").shape);
    return p.Done([out](const OnBackend& d) { d.backend().RmsNorm(d["x"], d["weight"], d.scalar("eps"), out); });
  };
  return c;
}

OpCase AddCase() {
  OpCase c{"add", "Add", {}, {}, {{"*", 0.0}}, {}, {}, {}};
  c.inputs = [](std::mt19937_64& rng, int s) {
    return Tensors{{"a", RandomF32(rng, Shape{4 * s, 10})}, {"b", RandomF32(rng, Shape{4 * s, 10})}};
  };
  c.prepare = [](Backend& b, const Tensors& in) {
    Prep p(b, in);
    const Tensor out = p.Output("out", DType::kF32, in.at("a").shape);
    return p.Done([out](const OnBackend& d) { d.backend().Add(d["a"], d["b"], out); });
  };
  return c;
}

OpCase SiluMulCase() {
  OpCase c{"silu_mul", "SiluMul", {}, {}, {{"*", 1e-6}}, {}, {}, {}};
  c.inputs = [](std::mt19937_64& rng, int s) { return Tensors{{"gate_up", RandomF32(rng, Shape{5 * s, 24}, -4, 4)}}; };
  c.prepare = [](Backend& b, const Tensors& in) {
    Prep p(b, in);
    const Tensor out = p.Output("out", DType::kF32, Shape{in.at("gate_up").shape[0], 12});
    return p.Done([out](const OnBackend& d) { d.backend().SiluMul(d["gate_up"], out); });
  };
  return c;
}

OpCase RopeCase(bool interleaved) {
  OpCase c{interleaved ? "rope_interleaved" : "rope_half", "Rope", {}, {}, {{"*", 1e-5}}, {}, {}, {}};
  c.inputs = [](std::mt19937_64& rng, int s) {
    std::vector<std::int32_t> positions(5 * s);
    std::uniform_int_distribution<std::int32_t> pos(0, 4000);
    for (auto& p : positions) p = pos(rng);
    std::vector<float> inv_freq(8);
    for (int i = 0; i < 8; ++i) inv_freq[i] = std::pow(10000.0f, -static_cast<float>(i) / 8.0f);
    return Tensors{{"x", RandomF32(rng, Shape{5 * s, 3, 24})},
                   {"positions", HostTensor::I32(Shape{5 * s}, positions)},
                   {"inv_freq", HostTensor::F32(Shape{8}, inv_freq)},
                   {"offset", HostTensor::I32(Shape{1}, {8})},
                   {"scaling", HostTensor::F32(Shape{1}, {1.1f})}};
  };
  c.prepare = [interleaved](Backend& b, const Tensors& in) {
    Prep p(b, in);
    p.InPlace("out", "x");
    return p.Done([interleaved](const OnBackend& d) {
      d.backend().Rope(d["x"], d.integer("offset"), 16, d.span<std::int32_t>("positions"), d["inv_freq"],
                       d.scalar("scaling"), interleaved);
    });
  };
  return c;
}

OpCase WriteKvCase() {
  OpCase c{"write_kv", "WriteKv (slot -1 skips its row)", {}, {}, {{"*", 0.0}}, {}, {}, {}};
  c.inputs = [](std::mt19937_64& rng, int s) {
    return Tensors{{"rows", RandomF32(rng, Shape{4, 6 * s})},
                   {"slots", HostTensor::I64(Shape{4}, {3, -1, 7, 0})},
                   {"cache", RandomF32(rng, Shape{10, 6 * s})}};
  };
  c.prepare = [](Backend& b, const Tensors& in) {
    Prep p(b, in);
    p.InPlace("cache", "cache");
    return p.Done([](const OnBackend& d) { d.backend().WriteKv(d["rows"], d.span<std::int64_t>("slots"), d["cache"]); });
  };
  return c;
}

kernels::MoeRouting Routing(std::int64_t experts, std::int64_t top_k, std::int64_t groups, std::int64_t topk_group) {
  return {experts, top_k, groups, topk_group, true, 2.5f};
}

OpCase MoeRouteCase() {
  OpCase c{"moe_route", "MoeRoute (4 groups, 2 kept, top 4)", {}, {}, {{"ids", 0.0}, {"*", 1e-6}}, {}, {}, {}};
  c.inputs = [](std::mt19937_64& rng, int s) {
    return Tensors{{"logits", RandomF32(rng, Shape{6 * s, 16}, -3, 3)}, {"bias", RandomF32(rng, Shape{16}, -0.1f, 0.1f)}};
  };
  c.prepare = [](Backend& b, const Tensors& in) {
    Prep p(b, in);
    const std::int64_t n = in.at("logits").shape[0];
    const Tensor ids = p.Output("ids", DType::kI32, Shape{n, 4}), weights = p.Output("weights", DType::kF32, Shape{n, 4});
    return p.Done([ids, weights](const OnBackend& d) {
      d.backend().MoeRoute(d["logits"], d["bias"], Routing(16, 4, 4, 2), ids, weights);
    });
  };
  return c;
}

// Distinct expert ids per token and routing weights for `n` tokens.
Tensors RandomRouting(std::mt19937_64& rng, std::int64_t n, std::int64_t experts, std::int64_t top_k) {
  std::vector<std::int32_t> ids;
  std::vector<std::int32_t> all(experts);
  std::iota(all.begin(), all.end(), 0);
  for (std::int64_t t = 0; t < n; ++t) {
    std::shuffle(all.begin(), all.end(), rng);
    ids.insert(ids.end(), all.begin(), all.begin() + top_k);
  }
  return {{"ids", HostTensor::I32(Shape{n, top_k}, ids)}, {"weights", RandomF32(rng, Shape{n, top_k}, 0.1f, 1.0f)}};
}

// Expert e's slice [e] of a stacked [experts, rows, cols] weight.
Tensor ExpertSlice(const Tensor& stacked, std::int64_t e) {
  Tensor t = stacked;
  const std::int64_t rows = stacked.shape[1], cols = stacked.shape[2];
  t.shape = Shape{rows, cols};
  t.data = static_cast<std::uint8_t*>(stacked.data) + DTypeBytes(stacked.dtype, e * rows * cols);
  return t;
}

OpCase MoeExpertsCase(bool fp8) {
  // With FP8 experts the activations between the projections are quantized again: a last-bit
  // difference in the gate/up sums (another summation order) can move a code across a rounding
  // boundary, so against an independent reference the bound is the quantizer's, not fp32's.
  OpCase c{fp8 ? "moe_experts_fp8" : "moe_experts", fp8 ? "MoeExperts (e4m3, 128x128 scales)" : "MoeExperts",
           {}, {}, {{"*", fp8 ? 1e-2 : 1e-5}}, {}, {}, {}};
  c.inputs = [fp8](std::mt19937_64& rng, int s) {
    const std::int64_t n = (fp8 ? 3 : 5) * s, experts = fp8 ? 3 : 4, hidden = fp8 ? 256 : 32, inter = fp8 ? 128 : 16;
    Tensors t = RandomRouting(rng, n, experts, 2);
    t["x"] = RandomF32(rng, Shape{n, hidden});
    if (!fp8) {
      t["gate_up"] = RandomF32(rng, Shape{experts, 2 * inter, hidden});
      t["down"] = RandomF32(rng, Shape{experts, hidden, inter});
      return t;
    }
    t["gate_up"] = RandomE4M3(rng, Shape{experts, 2 * inter, hidden});
    t["gate_up_scale"] = RandomF32(rng, Shape{experts, Blocks(2 * inter), Blocks(hidden)}, 1e-4f, 3e-4f);
    t["down"] = RandomE4M3(rng, Shape{experts, hidden, inter});
    t["down_scale"] = RandomF32(rng, Shape{experts, Blocks(hidden), Blocks(inter)}, 1e-4f, 3e-4f);
    return t;
  };
  c.prepare = [fp8](Backend& b, const Tensors& in) {
    Prep p(b, in);
    const OnBackend& d = p.in();
    const std::int64_t experts = in.at("gate_up").shape[0];
    std::vector<WeightView> gate_up, down;
    for (std::int64_t e = 0; e < experts; ++e) {
      if (fp8) {
        gate_up.emplace_back(ExpertSlice(d["gate_up"], e), ExpertSlice(d["gate_up_scale"], e), WeightFormat::Fp8Block128());
        down.emplace_back(ExpertSlice(d["down"], e), ExpertSlice(d["down_scale"], e), WeightFormat::Fp8Block128());
      } else {
        gate_up.emplace_back(ExpertSlice(d["gate_up"], e));
        down.emplace_back(ExpertSlice(d["down"], e));
      }
    }
    const Tensor out = p.Output("out", DType::kF32, in.at("x").shape);
    return p.Done([gate_up, down, out](const OnBackend& d) {
      d.backend().MoeExperts(d["x"], d["ids"], d["weights"], gate_up, down, out);
    });
  };
  return c;
}

// MLA over a paged latent cache: three sequences (queries at the end of a context, a whole
// prompt, and every other position as a context-parallel rank owns them).
struct MlaLayout {
  std::int64_t heads, nope, rope, v, lora, page;
};

Tensors MlaInputs(std::mt19937_64& rng, int s) {
  const MlaLayout l = s == 1 ? MlaLayout{2, 16, 8, 16, 32, 4} : MlaLayout{16, 128, 64, 128, 512, 16};
  const std::int64_t grow = s == 1 ? 1 : 8 * s;  // longer contexts in the perf mode
  struct Seq {
    std::int32_t kv_len;
    std::vector<std::int32_t> positions;
  };
  std::vector<Seq> seqs = {{static_cast<std::int32_t>(9 * grow), {}}, {3, {0, 1, 2}}, {static_cast<std::int32_t>(6 * grow), {}}};
  for (std::int32_t p = seqs[0].kv_len - 4; p < seqs[0].kv_len; ++p) seqs[0].positions.push_back(p);
  for (std::int32_t p = 1; p < seqs[2].kv_len; p += 2) seqs[2].positions.push_back(p);
  std::int32_t width = 0;
  for (const Seq& q : seqs) width = std::max<std::int32_t>(width, static_cast<std::int32_t>((q.kv_len + l.page - 1) / l.page));
  // Pages in a scrambled order, page 0 unused.
  std::vector<std::int32_t> free_pages(seqs.size() * width);
  std::iota(free_pages.begin(), free_pages.end(), 1);
  std::shuffle(free_pages.begin(), free_pages.end(), rng);
  std::vector<std::int32_t> meta, positions, tables(seqs.size() * width, 0);
  std::int32_t row = 0;
  for (std::size_t i = 0; i < seqs.size(); ++i) {
    const auto len = static_cast<std::int32_t>(seqs[i].positions.size());
    meta.insert(meta.end(), {row, len, seqs[i].kv_len});
    positions.insert(positions.end(), seqs[i].positions.begin(), seqs[i].positions.end());
    for (std::int64_t p = 0; p < (seqs[i].kv_len + l.page - 1) / l.page; ++p) tables[i * width + p] = free_pages[i * width + p];
    row += len;
  }
  const std::int64_t slots = (static_cast<std::int64_t>(free_pages.size()) + 1) * l.page;
  return {{"q", RandomF32(rng, Shape{row, l.heads, l.nope + l.rope})},
          {"cache", RandomF32(rng, Shape{slots, l.lora + l.rope})},
          {"kv_b", RandomF32(rng, Shape{l.heads * (l.nope + l.v), l.lora}, -0.2f, 0.2f)},
          {"seqs", HostTensor::I32(Shape{static_cast<std::int64_t>(seqs.size()), 3}, meta)},
          {"positions", HostTensor::I32(Shape{row}, positions)},
          {"tables", HostTensor::I32(Shape{static_cast<std::int64_t>(seqs.size()), width}, tables)},
          {"dims", HostTensor::I32(Shape{6}, {static_cast<std::int32_t>(l.heads), static_cast<std::int32_t>(l.nope),
                                              static_cast<std::int32_t>(l.rope), static_cast<std::int32_t>(l.v),
                                              static_cast<std::int32_t>(l.lora), static_cast<std::int32_t>(l.page)})},
          {"softmax_scale", HostTensor::F32(Shape{1}, {1.0f / std::sqrt(static_cast<float>(l.nope + l.rope))})}};
}

OpCase MlaCase(bool absorbed) {
  OpCase c{absorbed ? "mla_absorbed" : "mla_expanded", absorbed ? "mla().Absorbed" : "mla().Expanded",
           MlaInputs, {}, {{"*", 1e-5}}, {}, {}, {}};
  c.prepare = [absorbed](Backend& b, const Tensors& in) {
    Prep p(b, in);
    const OnBackend& d = p.in();
    const std::span<const std::int32_t> dims = d.span<std::int32_t>("dims"), meta = d.span<std::int32_t>("seqs");
    const std::span<const std::int32_t> positions = d.span<std::int32_t>("positions"), tables = d.span<std::int32_t>("tables");
    kernels::MlaShape shape{dims[0], dims[1], dims[2], dims[3], dims[4], d.scalar("softmax_scale"), dims[5]};
    const std::int64_t count = in.at("seqs").shape[0], width = in.at("tables").shape[1];
    std::vector<kernels::SeqAttention> seqs;
    for (std::int64_t i = 0; i < count; ++i) {
      kernels::SeqAttention a;
      a.query_start = meta[3 * i];
      a.query_len = meta[3 * i + 1];
      a.kv_len = meta[3 * i + 2];
      a.query_positions = positions.subspan(a.query_start, a.query_len);
      a.block_table = tables.subspan(i * width, width);
      seqs.push_back(a);
    }
    const Tensor out = p.Output("out", DType::kF32, Shape{in.at("q").shape[0], shape.num_heads, shape.v_head_dim});
    return p.Done([absorbed, seqs, shape, out](const OnBackend& d) {
      Backend& b = d.backend();
      b.Zero(out);
      if (absorbed) {
        b.mla().Absorbed(d["q"], d["cache"], d["kv_b"], seqs, shape, out);
      } else {
        b.mla().Expanded(d["q"], d["cache"], d["kv_b"], seqs, shape, out);
      }
    });
  };
  return c;
}

// LayerNorm over the whole row, with a bias (the indexer's key norm).
OpCase LayerNormCase() {
  OpCase c{"layer_norm", "LayerNorm", {}, {}, {{"*", 1e-6}}, {}, {}, {}};
  c.inputs = [](std::mt19937_64& rng, int s) {
    return Tensors{{"x", RandomF32(rng, Shape{6 * s, 24 * s}, -1.0f, 3.0f)},
                   {"weight", RandomF32(rng, Shape{24 * s}, 0.5f, 1.5f)},
                   {"bias", RandomF32(rng, Shape{24 * s})},
                   {"eps", HostTensor::F32(Shape{1}, {1e-6f})}};
  };
  c.prepare = [](Backend& b, const Tensors& in) {
    Prep p(b, in);
    const Tensor out = p.Output("out", DType::kF32, in.at("x").shape);
    return p.Done([out](const OnBackend& d) {
      d.backend().LayerNorm(d["x"], d["weight"], d["bias"], d.scalar("eps"), out);
    });
  };
  return c;
}

// The index key cache: exact fp32 rows, or e4m3 codes and an fp32 scale per token (U8 rows of
// dim + 4 bytes, compared byte for byte); slot -1 skips its row.
OpCase WriteIndexKeysCase(bool fp8) {
  OpCase c{fp8 ? "write_index_keys_fp8" : "write_index_keys", "dsa().WriteIndexKeys", {}, {}, {{"*", 0.0}}, {}, {}, {}};
  c.inputs = [fp8](std::mt19937_64& rng, int s) {
    const std::int64_t dim = fp8 ? 32 * s : 8 * s;
    Tensors t{{"keys", RandomF32(rng, Shape{4, dim}, -2.0f, 2.0f)}, {"slots", HostTensor::I64(Shape{4}, {3, -1, 7, 0})}};
    if (fp8)
      t["cache"] = Make<std::uint8_t>(DType::kU8, Shape{10, dim + 4}, std::vector<std::uint8_t>(10 * (dim + 4), 0));
    else
      t["cache"] = RandomF32(rng, Shape{10, dim});
    return t;
  };
  c.prepare = [fp8](Backend& b, const Tensors& in) {
    Prep p(b, in);
    p.InPlace("cache", "cache");
    const kernels::IndexerShape shape{1, in.at("keys").shape[1], 1, 1.0f, 1,
                                      fp8 ? kernels::IndexKeyFormat::kFp8 : kernels::IndexKeyFormat::kExact};
    return p.Done([shape](const OnBackend& d) {
      d.backend().dsa().WriteIndexKeys(d["keys"], d.span<std::int64_t>("slots"), d["cache"], shape);
    });
  };
  return c;
}

// Sequences of a paged cache: three of them (queries at the end of a context, a whole short
// prompt, every third position of a longer one), pages in a scrambled order, page 0 unused.
struct PagedSeqs {
  std::vector<std::int32_t> meta, positions, tables;
  std::int64_t rows = 0, width = 0, slots = 0;
};
PagedSeqs MakePagedSeqs(std::mt19937_64& rng, std::int32_t long_kv, std::int32_t other_kv, std::int64_t page) {
  struct Seq {
    std::int32_t kv_len;
    std::vector<std::int32_t> positions;
  };
  std::vector<Seq> seqs = {{long_kv, {}}, {3, {0, 1, 2}}, {other_kv, {}}};
  for (std::int32_t p = long_kv - 4; p < long_kv; ++p) seqs[0].positions.push_back(p);
  for (std::int32_t p = 1; p < other_kv; p += 3) seqs[2].positions.push_back(p);
  PagedSeqs out;
  for (const Seq& q : seqs) out.width = std::max<std::int64_t>(out.width, (q.kv_len + page - 1) / page);
  std::vector<std::int32_t> free_pages(seqs.size() * out.width);
  std::iota(free_pages.begin(), free_pages.end(), 1);
  std::shuffle(free_pages.begin(), free_pages.end(), rng);
  out.tables.assign(seqs.size() * out.width, 0);
  for (std::size_t i = 0; i < seqs.size(); ++i) {
    const auto len = static_cast<std::int32_t>(seqs[i].positions.size());
    out.meta.insert(out.meta.end(), {static_cast<std::int32_t>(out.rows), len, seqs[i].kv_len});
    out.positions.insert(out.positions.end(), seqs[i].positions.begin(), seqs[i].positions.end());
    for (std::int64_t p = 0; p < (seqs[i].kv_len + page - 1) / page; ++p)
      out.tables[i * out.width + p] = free_pages[i * out.width + p];
    out.rows += len;
  }
  out.slots = (static_cast<std::int64_t>(free_pages.size()) + 1) * page;
  return out;
}

// The sequences of a case's "seqs", "positions" and "tables" inputs.
std::vector<kernels::SeqAttention> SeqsOf(const OnBackend& d, const Tensors& in) {
  const std::span<const std::int32_t> meta = d.span<std::int32_t>("seqs"), positions = d.span<std::int32_t>("positions"),
                                      tables = d.span<std::int32_t>("tables");
  const std::int64_t count = in.at("seqs").shape[0], width = in.at("tables").shape[1];
  std::vector<kernels::SeqAttention> seqs;
  for (std::int64_t i = 0; i < count; ++i) {
    kernels::SeqAttention a;
    a.query_start = meta[3 * i];
    a.query_len = meta[3 * i + 1];
    a.kv_len = meta[3 * i + 2];
    a.query_positions = positions.subspan(a.query_start, a.query_len);
    a.block_table = tables.subspan(i * width, width);
    seqs.push_back(a);
  }
  return seqs;
}

// Rows of small integers in [-1, 1]; for an fp8 cache one ±7 at `amax_at` sets every row's scale to
// 7 / 448 = 1/64, so that each value's e4m3 code is exact. Every score is then exact in fp32 on any
// backend and in any order, and ties are frequent: the selection must match exactly.
std::vector<float> IntegerRows(std::mt19937_64& rng, std::int64_t rows, std::int64_t dim, bool fp8, int amax_at) {
  std::uniform_int_distribution<int> tri(-1, 1), coin(0, 1);
  std::vector<float> v(rows * dim);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t d = 0; d < dim; ++d) v[r * dim + d] = static_cast<float>(tri(rng));
    if (fp8) v[r * dim + amax_at] = coin(rng) ? 7.0f : -7.0f;
  }
  return v;
}

// IndexerTopK: every slot's key written through the backend's WriteIndexKeys when the case is
// prepared, then the selection (top 6 of a row's keys; rows that see at most 6 keys take them all).
OpCase IndexerTopKCase(bool fp8) {
  OpCase c{fp8 ? "indexer_topk_fp8" : "indexer_topk", "dsa().IndexerTopK", {}, {}, {{"*", 0.0}}, {}, {}, {}};
  c.inputs = [fp8](std::mt19937_64& rng, int s) {
    const std::int64_t heads = 4, dim = 32, page = 4;
    const PagedSeqs q = MakePagedSeqs(rng, 9 * s, 14 * s, page);
    std::uniform_int_distribution<int> five(-2, 2);
    std::vector<float> w(q.rows * heads);
    for (float& x : w) x = static_cast<float>(five(rng));
    const auto count = static_cast<std::int64_t>(q.meta.size() / 3);
    return Tensors{{"q", HostTensor::F32(Shape{q.rows, heads, dim}, IntegerRows(rng, q.rows * heads, dim, fp8, 0))},
                   {"weights", HostTensor::F32(Shape{q.rows, heads}, w)},
                   {"keys", HostTensor::F32(Shape{q.slots, dim}, IntegerRows(rng, q.slots, dim, fp8, 1))},
                   {"seqs", HostTensor::I32(Shape{count, 3}, q.meta)},
                   {"positions", HostTensor::I32(Shape{q.rows}, q.positions)},
                   {"tables", HostTensor::I32(Shape{count, q.width}, q.tables)},
                   {"dims", HostTensor::I32(Shape{4}, {static_cast<std::int32_t>(heads), static_cast<std::int32_t>(dim), 6,
                                                       static_cast<std::int32_t>(page)})},
                   {"weight_scale", HostTensor::F32(Shape{1}, {0.125f})}};
  };
  c.prepare = [fp8](Backend& b, const Tensors& in) {
    Prep p(b, in);
    const OnBackend& d = p.in();
    const std::span<const std::int32_t> dims = d.span<std::int32_t>("dims");
    const kernels::IndexerShape shape{dims[0], dims[1], dims[2], d.scalar("weight_scale"), dims[3],
                                      fp8 ? kernels::IndexKeyFormat::kFp8 : kernels::IndexKeyFormat::kExact};
    const std::int64_t slots = in.at("keys").shape[0];
    auto cache = std::make_shared<Buffer>(fp8 ? DType::kU8 : DType::kF32,
                                          Shape{slots, kernels::IndexKeyWidth(shape.key_format, shape.head_dim)},
                                          b.allocator());
    std::vector<std::int64_t> all(slots);
    std::iota(all.begin(), all.end(), 0);
    b.dsa().WriteIndexKeys(d["keys"], all, *cache, shape);
    const std::vector<kernels::SeqAttention> seqs = SeqsOf(d, in);
    const Tensor out = p.Output("topk", DType::kI32, Shape{in.at("q").shape[0], shape.topk});
    return p.Done([cache, seqs, shape, out](const OnBackend& d) {
      d.backend().dsa().IndexerTopK(d["q"], d["weights"], *cache, seqs, shape, out);
    });
  };
  return c;
}

// SparseMla over the MLA case's batch: each row attends a random set of its visible positions
// (min(width, visible) of them, every third row half as many, -1 after).
OpCase SparseMlaCase(bool absorbed) {
  OpCase c{absorbed ? "sparse_mla_absorbed" : "sparse_mla_expanded",
           absorbed ? "dsa().SparseMla (absorbed)" : "dsa().SparseMla (expanded)", {}, {}, {{"*", 1e-5}}, {}, {}, {}};
  c.inputs = [](std::mt19937_64& rng, int s) {
    Tensors t = MlaInputs(rng, s);
    const std::int64_t width = s == 1 ? 5 : 64 * s, rows = t.at("q").shape[0];
    std::vector<std::int32_t> sel(rows * width, -1);
    const std::int32_t* positions = t.at("positions").data<std::int32_t>();
    for (std::int64_t r = 0; r < rows; ++r) {
      std::vector<std::int32_t> all(positions[r] + 1);
      std::iota(all.begin(), all.end(), 0);
      std::shuffle(all.begin(), all.end(), rng);
      std::int64_t take = std::min<std::int64_t>(width, static_cast<std::int64_t>(all.size()));
      if (r % 3 == 2) take = std::max<std::int64_t>(1, take / 2);
      std::copy(all.begin(), all.begin() + take, sel.begin() + r * width);
    }
    t["topk"] = HostTensor::I32(Shape{rows, width}, sel);
    return t;
  };
  c.prepare = [absorbed](Backend& b, const Tensors& in) {
    Prep p(b, in);
    const OnBackend& d = p.in();
    const std::span<const std::int32_t> dims = d.span<std::int32_t>("dims");
    const kernels::MlaShape shape{dims[0], dims[1], dims[2], dims[3], dims[4], d.scalar("softmax_scale"), dims[5]};
    const std::vector<kernels::SeqAttention> seqs = SeqsOf(d, in);
    const Tensor out = p.Output("out", DType::kF32, Shape{in.at("q").shape[0], shape.num_heads, shape.v_head_dim});
    return p.Done([absorbed, seqs, shape, out](const OnBackend& d) {
      Backend& b = d.backend();
      b.Zero(out);
      b.dsa().SparseMla(d["q"], d["cache"], d["kv_b"], d["topk"], seqs, shape, absorbed, out);
    });
  };
  return c;
}

OpCase GatherRowsCase() {
  OpCase c{"gather_rows", "GatherRows", {}, {}, {{"*", 0.0}}, {}, {}, {}};
  c.inputs = [](std::mt19937_64& rng, int s) {
    return Tensors{{"x", RandomF32(rng, Shape{6 * s, 5})}, {"indices", HostTensor::I32(Shape{4}, {5, 0, 0, 3})}};
  };
  c.prepare = [](Backend& b, const Tensors& in) {
    Prep p(b, in);
    const Tensor out = p.Output("out", DType::kF32, Shape{4, 5});
    return p.Done([out](const OnBackend& d) { d.backend().GatherRows(d["x"], d.span<std::int32_t>("indices"), out); });
  };
  return c;
}

// Five rows: greedy, greedy with penalties and a mask, then seeded draws under top-k, under top-p
// and min-p with penalties, and plain; every row with its logprob and 3 alternatives.
OpCase SampleCase() {
  OpCase c{"sample", "Sample", {}, {}, {{"token", 0.0}, {"top_ids", 0.0}, {"*", 1e-6}}, {}, {}, {}};
  c.inputs = [](std::mt19937_64& rng, int s) {
    const std::int64_t vocab = 50 * s;
    std::vector<std::int32_t> seen(5 * 4), outputs(5 * 3), counts(5 * 3);
    std::uniform_int_distribution<std::int32_t> id(0, static_cast<std::int32_t>(vocab) - 1), count(1, 4);
    for (int r = 0; r < 5; ++r) {
      std::vector<std::int32_t> all(vocab);
      std::iota(all.begin(), all.end(), 0);
      std::shuffle(all.begin(), all.end(), rng);
      std::copy(all.begin(), all.begin() + 4, seen.begin() + r * 4);
      std::copy(all.begin() + 4, all.begin() + 7, outputs.begin() + r * 3);
      for (int k = 0; k < 3; ++k) counts[r * 3 + k] = count(rng);
    }
    return Tensors{{"logits", RandomF32(rng, Shape{5, vocab}, -4, 4)},
                   {"temperature", HostTensor::F32(Shape{5}, {0.0f, 0.0f, 0.8f, 1.0f, 1.3f})},
                   {"top_k", HostTensor::I32(Shape{5}, {-1, -1, 10, -1, -1})},
                   {"top_p", HostTensor::F32(Shape{5}, {1.0f, 1.0f, 1.0f, 0.7f, 1.0f})},
                   {"min_p", HostTensor::F32(Shape{5}, {0.0f, 0.0f, 0.0f, 0.05f, 0.0f})},
                   {"repetition", HostTensor::F32(Shape{5}, {1.0f, 1.3f, 1.0f, 1.2f, 1.0f})},
                   {"frequency", HostTensor::F32(Shape{5}, {0.0f, 0.5f, 0.0f, 0.3f, 0.0f})},
                   {"presence", HostTensor::F32(Shape{5}, {0.0f, 0.25f, 0.0f, 0.1f, 0.0f})},
                   {"seed", HostTensor::I64(Shape{5}, {1, 2, 3, 4, 5})},
                   {"counter", HostTensor::I64(Shape{5}, {0, 1, 7, 11, 3})},
                   {"masked", HostTensor::I32(Shape{5}, {-1, id(rng), -1, id(rng), -1})},
                   {"seen", HostTensor::I32(Shape{5, 4}, seen)},
                   {"output_ids", HostTensor::I32(Shape{5, 3}, outputs)},
                   {"output_counts", HostTensor::I32(Shape{5, 3}, counts)}};
  };
  c.prepare = [](Backend& b, const Tensors& in) {
    auto d = std::make_shared<OnBackend>(b, in);
    auto rows = std::make_shared<std::vector<kernels::SamplingRow>>(5);
    for (std::size_t r = 0; r < rows->size(); ++r) {
      kernels::SamplingRow& row = (*rows)[r];
      row.row = static_cast<std::int64_t>(r);
      row.temperature = d->span<float>("temperature")[r];
      row.top_k = d->span<std::int32_t>("top_k")[r];
      row.top_p = d->span<float>("top_p")[r];
      row.min_p = d->span<float>("min_p")[r];
      row.repetition_penalty = d->span<float>("repetition")[r];
      row.frequency_penalty = d->span<float>("frequency")[r];
      row.presence_penalty = d->span<float>("presence")[r];
      row.seed = static_cast<std::uint64_t>(d->span<std::int64_t>("seed")[r]);
      row.counter = static_cast<std::uint64_t>(d->span<std::int64_t>("counter")[r]);
      row.want_logprob = true;
      row.top_logprobs = 3;
      row.seen_tokens = d->span<std::int32_t>("seen").subspan(r * 4, 4);
      row.output_ids = d->span<std::int32_t>("output_ids").subspan(r * 3, 3);
      row.output_counts = d->span<std::int32_t>("output_counts").subspan(r * 3, 3);
      if (d->span<std::int32_t>("masked")[r] >= 0) row.masked_ids = d->span<std::int32_t>("masked").subspan(r, 1);
    }
    auto got = std::make_shared<std::vector<kernels::SampledToken>>(rows->size());
    PreparedCase p;
    p.launch = [d, rows, got] { d->backend().Sample((*d)["logits"], *rows, *got); };
    p.collect = [got] {
      std::vector<std::int32_t> tokens, top_ids;
      std::vector<float> logprobs, top_logprobs;
      for (const kernels::SampledToken& t : *got) {
        tokens.push_back(t.token);
        logprobs.push_back(t.logprob);
        top_ids.insert(top_ids.end(), t.top_ids.begin(), t.top_ids.end());
        top_logprobs.insert(top_logprobs.end(), t.top_logprobs.begin(), t.top_logprobs.end());
      }
      const std::int64_t n = static_cast<std::int64_t>(got->size());
      return Tensors{{"token", HostTensor::I32(Shape{n}, tokens)},
                     {"logprob", HostTensor::F32(Shape{n}, logprobs)},
                     {"top_ids", HostTensor::I32(Shape{n, 3}, top_ids)},
                     {"top_logprobs", HostTensor::F32(Shape{n, 3}, top_logprobs)}};
    };
    return p;
  };
  return c;
}

std::vector<OpCase> MakeCases() {
  std::vector<OpCase> cases = {LinearF32(),    LinearFp8(),         EmbeddingCase(),      ZeroCase(),
                               RmsNormCase(),  AddCase(),           SiluMulCase(),        RopeCase(true),
                               RopeCase(false), WriteKvCase(),      MoeRouteCase(),       MoeExpertsCase(false),
                               MoeExpertsCase(true), MlaCase(false), MlaCase(true),       GatherRowsCase(),
                               SampleCase(),   LayerNormCase(),     WriteIndexKeysCase(false), WriteIndexKeysCase(true),
                               IndexerTopKCase(false), IndexerTopKCase(true), SparseMlaCase(false), SparseMlaCase(true)};
  // What a device may differ by (tests/kernels_cuda/cuda_testlib.h gives the reasons): GEMMs sum in
  // another order, FP8 products and attention round through bf16 on tensor cores.
  const std::map<std::string, std::map<std::string, double>> device = {
      {"linear_f32", {{"*", 1e-5}}},      {"linear_fp8", {{"*", 1e-2}}},  {"rope_interleaved", {{"*", 1e-5}}},
      {"rope_half", {{"*", 1e-5}}},       {"rms_norm", {{"*", 1e-5}}},    {"silu_mul", {{"*", 1e-5}}},
      {"moe_route", {{"ids", 0.0}, {"*", 1e-5}}}, {"moe_experts", {{"*", 1e-5}}}, {"moe_experts_fp8", {{"*", 1e-2}}},
      {"mla_expanded", {{"*", 2e-2}}},    {"mla_absorbed", {{"*", 2e-2}}},
      {"layer_norm", {{"*", 1e-5}}},      {"sparse_mla_expanded", {{"*", 2e-2}}}, {"sparse_mla_absorbed", {{"*", 2e-2}}},
      {"sample", {{"token", 0.0}, {"top_ids", 0.0}, {"*", 1e-5}}}};
  for (OpCase& c : cases) {
    c.device_tolerance = device.count(c.name) ? device.at(c.name) : c.tolerance;
    if (!c.bytes) c.bytes = [](const Tensors& in) { return Bytes(in); };
    if (!c.flops) c.flops = [](const Tensors&) { return 0.0; };
  }
  return cases;
}

}  // namespace

HostTensor HostTensor::F32(Shape shape, const std::vector<float>& values) { return Make(DType::kF32, shape, values); }
HostTensor HostTensor::I32(Shape shape, const std::vector<std::int32_t>& values) {
  return Make(DType::kI32, shape, values);
}
HostTensor HostTensor::I64(Shape shape, const std::vector<std::int64_t>& values) {
  return Make(DType::kI64, shape, values);
}

std::vector<float> HostTensor::Floats() const {
  std::vector<float> out(numel());
  ConvertToF32(dtype, bytes.data(), out.data(), numel());
  return out;
}

Tensor HostTensor::view() const {
  Tensor t;
  t.data = const_cast<std::byte*>(bytes.data());
  t.dtype = dtype;
  t.shape = shape;
  return t;
}

Tensors RunCase(const OpCase& c, kernels::Backend& backend, const Tensors& inputs) {
  PreparedCase p = c.prepare(backend, inputs);
  p.launch();
  return p.collect();
}

const std::vector<OpCase>& OpCases() {
  static const std::vector<OpCase> cases = MakeCases();
  return cases;
}

double RelativeL2(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    diff += d * d;
    norm += static_cast<double>(want[i]) * want[i];
  }
  if (std::isnan(diff)) return INFINITY;
  return norm == 0.0 ? std::sqrt(diff) : std::sqrt(diff / norm);
}

std::string CompareOutputs(const OpCase& c, const Tensors& got, const Tensors& want,
                           const std::map<std::string, double>& tolerance) {
  std::string problems;
  for (const auto& [name, expected] : want) {
    auto it = got.find(name);
    if (it == got.end()) {
      problems += StrCat(c.name, ": no output '", name, "'; ");
      continue;
    }
    if (!(it->second.shape == expected.shape)) {
      problems += StrCat(c.name, ".", name, ": shape ", it->second.shape.ToString(), ", expected ",
                         expected.shape.ToString(), "; ");
      continue;
    }
    const double tol = tolerance.count(name) ? tolerance.at(name) : tolerance.at("*");
    const double err = RelativeL2(it->second.Floats(), expected.Floats());
    if (!(err <= tol)) problems += StrCat(c.name, ".", name, ": relative L2 ", err, " above ", tol, "; ");
  }
  return problems;
}

}  // namespace fission::testing
