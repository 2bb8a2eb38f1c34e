"""Puts the benchmark's RESULT lines next to torch's and the measured ceilings.

usage: report.py <bench.log> <torch.log> <tests.log>   (prints a Markdown table)
"""
import re
import sys


def parse(path):
    out, info = {}, []
    try:
        for line in open(path):
            m = re.match(r"RESULT (\S+) (\S+) (\S+) (.+)", line)
            if m:
                out[m.group(1)] = (float(m.group(2)), float(m.group(3)), m.group(4).strip())
            elif line.startswith("INFO"):
                info.append(line.strip())
    except OSError:
        pass
    return out, info


def main():
    ours, our_info = parse(sys.argv[1])
    theirs, their_info = parse(sys.argv[2])
    bf16_ceiling = theirs.get("torch_ceiling_bf16_matmul_8192", (0, 750.0, ""))[1]
    fp8_ceiling = theirs.get("torch_ceiling_fp8_scaled_mm_8192", (0, 1300.0, ""))[1]
    hbm = theirs.get("torch_hbm_copy_4GiB", ours.get("hbm_copy_4GiB", (0, 4200.0, "")))[1]
    print(f"ceilings measured here: bf16 matmul {bf16_ceiling:.0f} TFLOP/s, fp8 {fp8_ceiling:.0f} TFLOP/s, "
          f"device copy {hbm:.0f} GB/s")
    print()
    print("| case | fission us | fission rate | torch us | torch rate | fission/torch | of ceiling |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, (us, rate, unit) in ours.items():
        ref_name = "torch_" + re.sub(r"prefill_mla(_generic)?", "prefill_sdpa", name)
        ref = theirs.get(ref_name)
        if name.startswith("gemm_fp8"):
            ceiling = fp8_ceiling
        elif unit.startswith("GB"):
            ceiling = hbm
        else:
            ceiling = bf16_ceiling
        frac = rate / ceiling if ceiling else 0
        if ref:
            ratio = ref[0] / us  # time ratio: > 1 means faster than torch
            print(f"| {name} | {us:.1f} | {rate:.1f} {unit} | {ref[0]:.1f} | {ref[1]:.1f} | {ratio:.2f} | {frac:.0%} |")
        else:
            print(f"| {name} | {us:.1f} | {rate:.1f} {unit} | - | - | - | {frac:.0%} |")
    for line in our_info + their_info:
        print(line)


if __name__ == "__main__":
    main()
