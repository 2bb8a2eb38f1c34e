"""Torch reference numbers for bench/cuda/cuda_bench.cc, on the same GPU in the same invocation.

Prints `RESULT torch_<name> <time_us> <rate> <unit>` lines with the same case names as the
benchmark, plus the measured ceilings (a large bf16 and FP8 matmul, a large device copy).
Timing: CUDA events, median of 15 runs after 3 warm-ups, weights rotated past the L2 as the
benchmark does.
"""
import sys

import torch
import torch.nn.functional as F

GEMMS = [("q_a_proj", 1536, 7168), ("q_b_proj", 24576, 1536), ("kv_a_proj", 576, 7168),
         ("o_proj", 7168, 16384), ("expert_gate_up", 4096, 7168), ("expert_down", 7168, 2048)]
MS = [1, 64, 4096]
FP8_MS = [1, 8, 32, 64, 4096]


def time_us(fn, warmup=3, reps=15):
    for i in range(warmup):
        fn(i)
    torch.cuda.synchronize()
    times = []
    for i in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn(i)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3)
    times.sort()
    return times[len(times) // 2]


def copies(nbytes):
    return max(1, min(16, (256 << 20) // nbytes + 1))


def result(name, us, rate, unit):
    print(f"RESULT torch_{name} {us:.2f} {rate:.1f} {unit}", flush=True)


def ceilings():
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    us = time_us(lambda i: torch.matmul(a, b))
    result("ceiling_bf16_matmul_8192", us, 2 * n**3 / (us * 1e-6) / 1e12, "TFLOP/s")
    a8 = a.to(torch.float8_e4m3fn)
    b8 = b.to(torch.float8_e4m3fn).t().contiguous().t()
    one = torch.ones((), device="cuda")
    us = time_us(lambda i: torch._scaled_mm(a8, b8, one, one, out_dtype=torch.bfloat16))
    result("ceiling_fp8_scaled_mm_8192", us, 2 * n**3 / (us * 1e-6) / 1e12, "TFLOP/s")
    x = torch.empty(4 << 30, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    us = time_us(lambda i: y.copy_(x))
    result("hbm_copy_4GiB", us, 2 * x.numel() / (us * 1e-6) / 1e9, "GB/s")
    del x, y


def gemm_bf16():
    for name, n, k in GEMMS + [("lm_head", 129280, 7168)]:
        c = copies(n * k * 2)
        ws = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02 for _ in range(c)]
        for m in MS:
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            us = time_us(lambda i: F.linear(x, ws[i % c]))
            result(f"gemm_bf16_{name}_m{m}", us, 2 * m * n * k / (us * 1e-6) / 1e12, "TFLOP/s")
        del ws


def scaled_mm_variants(m, n, k):
    """Scale layouts to try, best first: DeepSeek's blockwise 1x128 / 128x128, then rowwise."""
    kb, nb = (k + 127) // 128, (n + 127) // 128
    dev = "cuda"
    return [
        ("blockwise", lambda: torch.rand(kb, m, device=dev).t() + 0.5,
         lambda: torch.rand(nb, kb, device=dev).t() + 0.5),
        ("blockwise-kmajor-b", lambda: torch.rand(kb, m, device=dev).t() + 0.5,
         lambda: torch.rand(kb, nb, device=dev) + 0.5),
        ("rowwise", lambda: torch.rand(m, 1, device=dev) + 0.5, lambda: torch.rand(1, n, device=dev) + 0.5),
    ]


def gemm_fp8():
    for name, n, k in GEMMS:
        c = copies(n * k)
        ws = [(torch.randn(n, k, device="cuda") * 100).clamp(-448, 448).to(torch.float8_e4m3fn) for _ in range(c)]
        for m in FP8_MS:
            x = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
            done = False
            for variant, sa_fn, sb_fn in scaled_mm_variants(m, n, k):
                try:
                    sa, sb = sa_fn(), sb_fn()
                    torch._scaled_mm(x, ws[0].t(), sa, sb, out_dtype=torch.bfloat16)
                    torch.cuda.synchronize()
                except Exception as e:  # this layout or shape is not supported: try the next
                    last = f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
                    continue
                us = time_us(lambda i: torch._scaled_mm(x, ws[i % c].t(), sa, sb, out_dtype=torch.bfloat16))
                result(f"gemm_fp8_{name}_m{m}", us, 2 * m * n * k / (us * 1e-6) / 1e12, "TFLOP/s")
                print(f"INFO torch_gemm_fp8_{name}_m{m} scales={variant}", flush=True)
                done = True
                break
            if not done:
                print(f"INFO torch_gemm_fp8_{name}_m{m} unsupported ({last})", flush=True)
        del ws


def sdpa():
    from torch.nn.attention import SDPBackend, sdpa_kernel
    heads, d = 16, 160  # 2·(160+160) FLOPs per query-key pair, as MLA's 2·(192+128)
    for s in [4096, 16384, 65536]:
        q, k, v = (torch.randn(1, heads, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            us = time_us(lambda i: F.scaled_dot_product_attention(q, k, v, is_causal=True), warmup=2, reps=5)
        flops = 2.0 * heads * (s * (s + 1) / 2) * (d + d)
        result(f"prefill_sdpa_s{s}", us, flops / (us * 1e-6) / 1e12, "TFLOP/s")


if __name__ == "__main__":
    print(f"INFO torch {torch.__version__} device {torch.cuda.get_device_name()}", flush=True)
    what = set(sys.argv[1:]) or {"ceilings", "gemm", "fp8", "prefill"}
    if "ceilings" in what:
        ceilings()
    if "gemm" in what:
        gemm_bf16()
    if "fp8" in what:
        gemm_fp8()
    if "prefill" in what:
        sdpa()
