# SPDX-License-Identifier: Apache-2.0
"""Checks what `polybus bench --workload ... --result result.json` wrote for each broker: every
field of OMB's TestResult with its JSON type (benchmark-framework's TestResult.java: int and long
are integers, double numbers, List arrays, Map<Double, ...> objects keyed by the double's text),
at least one test window, traffic that flowed, and what did not map said where it applies.

    check_omb_result.py COUNT BROKER...   (in the folder of result.json or result-N.json)
"""
import json
import sys

INTEGER, NUMBER, STRING = "integer", "number", "string"

fields = {"workload": STRING, "driver": STRING, "messageSize": INTEGER, "topics": INTEGER,
          "partitions": INTEGER, "producersPerTopic": INTEGER, "consumersPerTopic": INTEGER,
          "publishRate": [NUMBER], "publishErrorRate": [NUMBER], "consumeRate": [NUMBER],
          "backlog": [INTEGER],
          "aggregatedPublishLatencyQuantiles": {NUMBER},
          "aggregatedPublishDelayLatencyQuantiles": {INTEGER},
          "aggregatedEndToEndLatencyQuantiles": {NUMBER}}
for prefix in ("publishLatency", "publishDelayLatency", "endToEndLatency"):
    for suffix in ("Avg", "50pct", "75pct", "95pct", "99pct", "999pct", "9999pct", "Max"):
        integers = prefix == "publishDelayLatency" and suffix != "Avg"
        kind = INTEGER if integers else NUMBER
        fields[prefix + suffix] = [kind]
        fields["aggregated" + prefix[0].upper() + prefix[1:] + suffix] = kind
assert len(fields) == 62, len(fields)



def is_kind(value, kind):
    if kind == INTEGER:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == NUMBER:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, str)


def type_failures(result, where):
    """Each field of OMB's TestResult that is missing or not of its type, and series whose
    lengths differ from publishRate's."""
    failures = []
    for name, kind in fields.items():
        if name not in result:
            failures.append("%s: no %s" % (where, name))
            continue
        value = result[name]
        if isinstance(kind, list):
            ok = isinstance(value, list) and all(is_kind(v, kind[0]) for v in value)
        elif isinstance(kind, set):
            (inner,) = kind
            ok = isinstance(value, dict) and all(is_kind(v, inner) for v in value.values())
            ok = ok and all(float(k) >= 0 for k in value)
        else:
            ok = is_kind(value, kind)
        if not ok:
            failures.append("%s: %s is %r, not of OMB's type" % (where, name, value))
    windows = len(result.get("publishRate", []))
    if windows < 1:
        failures.append("%s: no test window" % where)
    for name in [n for n, k in fields.items() if isinstance(k, list)]:
        if len(result.get(name, [])) != windows:
            failures.append("%s: %s has %d windows, publishRate %d" % (where, name,
                                                                       len(result.get(name, [])), windows))
    return failures


def main():
    count = int(sys.argv[1])
    brokers = sys.argv[2:]
    failures = []
    for i, broker in enumerate(brokers, 1):
        path = "result.json" if count == 1 else "result-%d.json" % i
        with open(path) as f:
            result = json.load(f)
        where = "%s (%s)" % (path, broker)
        failures += type_failures(result, where)
        windows = len(result.get("publishRate", []))
        polybus = result.get("polybus", {})
        if result.get("driver") != "broker:" + broker:
            failures.append("%s: driver %r" % (where, result.get("driver")))
        if not polybus.get("complete"):
            failures.append("%s: not complete" % where)
        if polybus.get("received", 0) == 0 or polybus.get("published", 0) == 0:
            failures.append("%s: nothing flowed: %r" % (where, polybus))
        if result.get("aggregatedEndToEndLatency50pct", 0) <= 0:
            failures.append("%s: no end-to-end latency" % where)
        unmapped = " ".join(polybus.get("unmapped", []))
        if broker.startswith("memodb") and "no publish/subscribe" not in unmapped:
            failures.append("%s: request/reply mapping not said: %r" % (where, unmapped))
        if broker.startswith("quickio") and "confirms no publish" not in unmapped:
            failures.append("%s: unconfirmed publish not said: %r" % (where, unmapped))
        print("%s: %d window(s), %d published, %d received, e2e p99 %.3f ms; unmapped: %s" % (
            where, windows, polybus.get("published", 0), polybus.get("received", 0),
            result.get("aggregatedEndToEndLatency99pct", 0), unmapped or "none"))
    if failures:
        print("\n".join(failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
