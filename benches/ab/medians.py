"""Medians per build and operation of "A|B OPERATION TENTHS_OF_MS" lines."""
import collections
import statistics
import sys

times = collections.defaultdict(list)
for line in open(sys.argv[1]):
    who, operation, tenths = line.split()
    times[operation, who].append(int(tenths) / 10)
for (operation, who), values in sorted(times.items()):
    print(f"{operation:12} {who}: median {statistics.median(values):.1f} ms, "
          f"min {min(values):.1f} ms, {len(values)} runs")
