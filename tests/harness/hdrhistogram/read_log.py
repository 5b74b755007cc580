# SPDX-License-Identifier: Apache-2.0
"""Reads HdrHistogram interval logs with HdrHistogram's Python library (the hdrhistogram package
on PyPI, module hdrh) and prints, per tag, the count and percentiles of all intervals together,
one JSON object per line sorted by tag, with the keys `polybus bench merge` prints (but mean):
so that polybus's logs are checked against a third-party reader.

    read_log.py FILE.hlog...
"""
import json
import sys

from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader

# Wide enough for any log polybus writes (microseconds up to an hour, 3 digits).
LOWEST, HIGHEST, DIGITS = 1, 3600000000, 3

merged = {}
for path in sys.argv[1:]:
    reader = HistogramLogReader(path, HdrHistogram(LOWEST, HIGHEST, DIGITS))
    while True:
        interval = reader.get_next_interval_histogram()
        if interval is None:
            break
        tag = interval.get_tag() or ""
        merged.setdefault(tag, HdrHistogram(LOWEST, HIGHEST, DIGITS)).add(interval)
    reader.close()
if not merged:
    sys.exit("no interval read from " + " ".join(sys.argv[1:]))
for tag in sorted(merged):
    h = merged[tag]
    line = {"tag": tag, "count": h.get_total_count()}
    for name, percentile in (("p50", 50), ("p75", 75), ("p90", 90), ("p95", 95), ("p99", 99),
                             ("p999", 99.9), ("p9999", 99.99)):
        line[name] = h.get_value_at_percentile(percentile)
    line["max"] = h.get_max_value()
    print(json.dumps(line, separators=(",", ":")))
