#!/usr/bin/env python3
"""The MLA attention benchmarks of one build, against a reference build and torch's SDPA.

Reads the `RESULT name time_us rate unit` lines of `fission_cuda_bench decode prefill` (new build,
and optionally a reference build run in the same invocation) and of `tools/gpu/torch_ref.py
prefill`, and prints one table a form (a measurement, not a test):
  decode  — each case's time and bandwidth (bytes: the latent rows read), its fraction of the
            card's HBM bandwidth, and new / reference (the reference's time over the new one);
  prefill — each case's TFLOP/s, its ratio to SDPA's at the same length and FLOPs, and new / ref.
With --ncu (Nsight Compute's log of the decode kernel alone) its duration and DRAM throughput
follow the decode table.

  usage: attention_table.py NEW_LOG [--ref REF_LOG] [--sdpa SDPA_LOG] [--ncu NCU_LOG]
         [--hbm GBPS] [--title TEXT]
"""
import argparse
import re


def results(path):
    """name -> (time_us, rate) of a log's RESULT lines; a missing path or file gives {}."""
    out = {}
    if not path:
        return out
    try:
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 4 and parts[0] == "RESULT":
                    try:
                        out[parts[1]] = (float(parts[2]), float(parts[3]))
                    except ValueError:
                        pass
    except FileNotFoundError:
        pass
    return out


def ncu_kernel(path):
    """(duration_us, dram_percent) of the first kernel in an Nsight Compute log, or None."""
    if not path:
        return None
    try:
        text = open(path).read()
    except FileNotFoundError:
        return None
    duration = re.search(r"^\s*Duration\s+(\S+)\s+([\d.,]+)", text, re.M)
    dram = re.search(r"^\s*DRAM Throughput\s+%\s+([\d.,]+)", text, re.M)
    if not duration or not dram:
        return None
    scale = {"ns": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}.get(duration.group(1), 1.0)
    return float(duration.group(2).replace(",", "")) * scale, float(dram.group(1).replace(",", ""))


def speedup(name, new, ref):
    return f"{ref[name][0] / new[name][0]:.2f}" if name in ref and new[name][0] > 0 else "-"


def table(new, prefix, header, row, footer):
    """Lines of a table of new's cases named prefix*: the header, row(name) each, then footer."""
    names = [n for n in new if n.startswith(prefix)]
    return [header] + [row(n) for n in names] + footer if names else []


def decode_table(new, ref, hbm_gbps, kernel):
    def row(name):
        us, gbps = new[name]
        ref_us = f"{ref[name][0]:.1f}" if name in ref else "-"
        return (f"{name:<32} {us:>9.1f} {gbps:>7.0f} {gbps / hbm_gbps:>7.1%} {ref_us:>9} "
                f"{speedup(name, new, ref):>8}")

    footer = [f"(HBM: {hbm_gbps:.0f} GB/s; goal: >= 70% at 16 heads x 4K)"]
    if kernel is not None:
        footer.insert(0, f"the decode kernel alone (Nsight Compute): {kernel[0]:.1f} us, "
                         f"{kernel[1]:.1f}% of DRAM bandwidth")
    header = f"{'decode case':<32} {'us':>9} {'GB/s':>7} {'of HBM':>7} {'ref us':>9} {'new/ref':>8}"
    return table(new, "decode_mla_", header, row, footer)


def prefill_table(new, ref, sdpa):
    def row(name):
        us, tflops = new[name]
        torch = sdpa.get("torch_prefill_sdpa_s" + name.rsplit("_s", 1)[-1])
        torch_rate = f"{torch[1]:.1f}" if torch else "-"
        ratio = f"{tflops / torch[1]:.2f}" if torch and torch[1] > 0 else "-"
        return f"{name:<32} {us:>10.1f} {tflops:>8.1f} {torch_rate:>8} {ratio:>6} {speedup(name, new, ref):>8}"

    header = f"{'prefill case':<32} {'us':>10} {'TFLOP/s':>8} {'SDPA':>8} {'/SDPA':>6} {'new/ref':>8}"
    footer = ["(SDPA: torch's flash backend, 16 heads of 160, causal; goal: >= 0.9x)"]
    return table(new, "prefill_mla_", header, row, footer)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("new")
    parser.add_argument("--ref")
    parser.add_argument("--sdpa")
    parser.add_argument("--ncu")
    parser.add_argument("--hbm", type=float, default=4800.0, help="the card's HBM bandwidth, GB/s")
    parser.add_argument("--title", default="")
    args = parser.parse_args()
    new = results(args.new)
    if not new:
        print(f"{args.new}: no RESULT lines")
        return
    if args.title:
        print(f"# {args.title}")
    for table in (decode_table(new, results(args.ref), args.hbm, ncu_kernel(args.ncu)),
                  prefill_table(new, results(args.ref), results(args.sdpa))):
        if table:
            print("\n".join(table))
            print()


if __name__ == "__main__":
    main()
