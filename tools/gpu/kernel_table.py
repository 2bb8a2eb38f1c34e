#!/usr/bin/env python3
"""The last whole decode step of an ncu CSV (tools/gpu/kernel_profile.sh), kernel by kernel.

A step ends with the sampling kernel (SampleKernel); the last step is the kernels between the
second-to-last and the last of them. Prints every kernel in launch order (time, DRAM bytes read,
the rate), then the kernels grouped by name, largest total first.

    usage: kernel_table.py NCU_CSV [TITLE]
"""
import collections
import csv
import sys

STEP_END = "SampleKernel"


def read_kernels(path):
    """[(id, name, grid, block, {metric: value})] in launch order."""
    kernels = collections.OrderedDict()
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if not row.get("ID"):
                continue
            k = kernels.setdefault(row["ID"], [row["ID"], row["Kernel Name"], row["Grid Size"], row["Block Size"], {}])
            try:
                k[4][row["Metric Name"]] = float(row["Metric Value"].replace(",", ""))
            except ValueError:
                pass
    return list(kernels.values())


def short(name):
    """The function's name without its namespace, template arguments and parameters."""
    base = name.replace("(anonymous namespace)", "").split("(")[0]
    depth, out = 0, []
    for ch in base:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    base = "".join(out).strip()
    return base.split("::")[-1].split(" ")[-1] or name[:40]


def main():
    kernels = read_kernels(sys.argv[1])
    title = sys.argv[2] if len(sys.argv) > 2 else sys.argv[1]
    ends = [i for i, k in enumerate(kernels) if STEP_END in k[1]]
    if len(ends) < 2:
        print(f"{title}: fewer than two sampling kernels among {len(kernels)} kernels; no whole step")
        return 1
    step = kernels[ends[-2] + 1:ends[-1] + 1]
    total_us = sum(k[4].get("gpu__time_duration.sum", 0.0) for k in step) / 1e3
    total_bytes = sum(k[4].get("dram__bytes_read.sum", 0.0) for k in step)
    print(f"# {title}")
    print(f"# last decode step: {len(step)} kernels, {total_us:.1f} us of kernel time, "
          f"{total_bytes / 1e6:.1f} MB read from DRAM ({total_bytes / max(total_us, 1e-9) / 1e6:.2f} TB/s)")
    print(f"{'#':>4} {'kernel':<34} {'grid':>16} {'block':>12} {'us':>8} {'MB':>8} {'TB/s':>6}")
    groups = collections.OrderedDict()
    for i, (_, name, grid, block, m) in enumerate(step):
        us = m.get("gpu__time_duration.sum", 0.0) / 1e3
        mb = m.get("dram__bytes_read.sum", 0.0) / 1e6
        print(f"{i:>4} {short(name)[:34]:<34} {grid:>16} {block:>12} {us:>8.2f} {mb:>8.2f} {mb / max(us, 1e-9):>6.2f}")
        g = groups.setdefault(short(name), [0, 0.0, 0.0])
        g[0] += 1
        g[1] += us
        g[2] += mb
    print(f"\n{'kernel':<34} {'count':>6} {'total us':>9} {'share':>6} {'us each':>8} {'MB':>9} {'TB/s':>6}")
    for name, (count, us, mb) in sorted(groups.items(), key=lambda kv: -kv[1][1]):
        print(f"{name[:34]:<34} {count:>6} {us:>9.1f} {us / total_us:>6.1%} {us / count:>8.2f} {mb:>9.1f} "
              f"{mb / max(us, 1e-9):>6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
