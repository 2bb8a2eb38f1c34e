#!/usr/bin/env python3
"""The last whole decode step of an ncu CSV (tools/gpu/kernel_profile.sh), kernel by kernel.

A step ends with the sampling kernel (SampleKernel); the last step is the kernels between the
second-to-last and the last of them. Prints every kernel in launch order (time, DRAM bytes read,
the rate), then the kernels grouped by name, largest total first. With --ref REF_CSV (the same
step of a reference build), the grouped table gets the reference's calls and time beside each
kernel and the difference, so a change is read kernel by kernel.

    usage: kernel_table.py NCU_CSV [TITLE] [--ref REF_CSV]
"""
import argparse
import collections
import csv
import sys

STEP_END = "SampleKernel"
TIME, BYTES = "gpu__time_duration.sum", "dram__bytes_read.sum"


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


def last_step(path):
    """The kernels of the last whole decode step, or None."""
    kernels = read_kernels(path)
    ends = [i for i, k in enumerate(kernels) if STEP_END in k[1]]
    return kernels[ends[-2] + 1:ends[-1] + 1] if len(ends) >= 2 else None


def grouped(step):
    """{short name: [calls, us, MB]} in launch order of first appearance."""
    groups = collections.OrderedDict()
    for _, name, _, _, m in step:
        g = groups.setdefault(short(name), [0, 0.0, 0.0])
        g[0] += 1
        g[1] += m.get(TIME, 0.0) / 1e3
        g[2] += m.get(BYTES, 0.0) / 1e6
    return groups


def print_step(title, step):
    total_us = sum(k[4].get(TIME, 0.0) for k in step) / 1e3
    total_mb = sum(k[4].get(BYTES, 0.0) for k in step) / 1e6
    print(f"# {title}")
    print(f"# last decode step: {len(step)} kernels, {total_us:.1f} us of kernel time, "
          f"{total_mb:.1f} MB read from DRAM ({total_mb / max(total_us, 1e-9):.2f} TB/s)")
    print(f"{'#':>4} {'kernel':<34} {'grid':>16} {'block':>12} {'us':>8} {'MB':>8} {'TB/s':>6}")
    for i, (_, name, grid, block, m) in enumerate(step):
        us, mb = m.get(TIME, 0.0) / 1e3, m.get(BYTES, 0.0) / 1e6
        print(f"{i:>4} {short(name)[:34]:<34} {grid:>16} {block:>12} {us:>8.2f} {mb:>8.2f} {mb / max(us, 1e-9):>6.2f}")
    return total_us


def print_groups(groups, total_us, ref):
    header = f"\n{'kernel':<34} {'count':>6} {'total us':>9} {'share':>6} {'us each':>8} {'MB':>9} {'TB/s':>6}"
    if ref is not None:
        header += f" {'ref count':>9} {'ref us':>9} {'change us':>10}"
    print(header)
    names = list(groups) + [n for n in (ref or {}) if n not in groups]
    for name in sorted(names, key=lambda n: -max(groups.get(n, [0, 0.0])[1], (ref or {}).get(n, [0, 0.0])[1])):
        count, us, mb = groups.get(name, [0, 0.0, 0.0])
        line = (f"{name[:34]:<34} {count:>6} {us:>9.1f} {us / max(total_us, 1e-9):>6.1%} {us / max(count, 1):>8.2f} "
                f"{mb:>9.1f} {mb / max(us, 1e-9):>6.2f}")
        if ref is not None:
            ref_count, ref_us, _ = ref.get(name, [0, 0.0, 0.0])
            line += f" {ref_count:>9} {ref_us:>9.1f} {us - ref_us:>+10.1f}"
        print(line)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv")
    parser.add_argument("title", nargs="?")
    parser.add_argument("--ref", help="the same step of a reference build, as an ncu CSV")
    args = parser.parse_intermixed_args()
    step = last_step(args.csv)
    title = args.title or args.csv
    if step is None:
        print(f"{title}: fewer than two sampling kernels; no whole step")
        return 1
    total_us = print_step(title, step)
    ref = None
    if args.ref:
        ref_step = last_step(args.ref)
        if ref_step is None:
            print(f"{args.ref}: fewer than two sampling kernels; no reference step")
            return 1
        ref = grouped(ref_step)
        ref_us = sum(g[1] for g in ref.values())
        print(f"# reference ({args.ref}): {len(ref_step)} kernels, {ref_us:.1f} us of kernel time; "
              f"this step {total_us / max(ref_us, 1e-9):.3f} of it")
    print_groups(grouped(step), total_us, ref)
    return 0


if __name__ == "__main__":
    sys.exit(main())
