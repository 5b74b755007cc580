#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The defaults each protocol page states are the ones the client has.

A page's table under `<!-- defaults of SCHEME -->` names options and their defaults, next to what
they do; `polybus schemes` prints every scheme's options with their defaults from the option
registry. Each row must match it, and each page must state the defaults an application meets
first: close_timeout, op_timeout and max_in_flight everywhere, and the scheme's own listed below.

Usage: check_doc_defaults.py POLYBUS_COMMAND SOURCE_DIR
"""
import pathlib
import re
import subprocess
import sys

# What every page states, and what each scheme adds (the defaults that change what an
# application sees there).
EVERY_PAGE = {"close_timeout", "op_timeout", "max_in_flight"}
PER_SCHEME = {
    "nsq://": {"requeue_delay", "max_requeue_delay", "max_attempts"},
    "figg://": {"window"},
    "quickio://": {"max_queued_bytes"},
    "memodb+tcp://": {"max_requests"},
}
PAGES = ["docs/nsq.md", "docs/figg.md", "docs/quickio.md", "docs/memodb.md"]


def registry_defaults(command):
    out = subprocess.run([command, "schemes"], check=True, capture_output=True, text=True).stdout
    schemes, scheme = {}, None
    for line in out.splitlines():
        m = re.match(r"## (\S+)", line)
        if m:
            scheme = m.group(1)
            schemes[scheme] = {}
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if scheme and line.startswith("|") and len(cells) >= 2 and cells[0] not in ("option", "---"):
            schemes[scheme][cells[0]] = cells[1]
    return schemes


def page_tables(path):
    """(scheme, line number, option, default) of every row under a defaults marker."""
    rows = []
    lines = path.read_text().splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"<!-- defaults of (\S+) -->", line.strip())
        if not m:
            continue
        j = i + 1
        while j < len(lines) and lines[j].startswith("|"):
            cells = [c.strip() for c in lines[j].strip().strip("|").split("|")]
            if cells[0] not in ("option",) and not cells[0].startswith("---"):
                rows.append((m.group(1), j + 1, cells[0].strip("`"), cells[1]))
            j += 1
    return rows


def main():
    command, source = sys.argv[1], pathlib.Path(sys.argv[2])
    registry = registry_defaults(command)
    failures = []
    for page in PAGES:
        rows = page_tables(source / page)
        stated = {}
        for scheme, line, option, default in rows:
            where = f"{page}:{line}"
            if scheme not in registry:
                failures.append(f"{where}: no scheme {scheme} in `polybus schemes`")
                continue
            known = registry[scheme]
            if option not in known:
                failures.append(f"{where}: {scheme} has no option '{option}'")
            elif known[option] != default:
                failures.append(f"{where}: {scheme} '{option}' defaults to {known[option]}, "
                                f"the page says {default}")
            stated.setdefault(scheme, set()).add(option)
        if not stated:
            failures.append(f"{page}: no table under <!-- defaults of SCHEME -->")
        for scheme, options in stated.items():
            for missing in sorted((EVERY_PAGE | PER_SCHEME.get(scheme, set())) - options):
                failures.append(f"{page}: the defaults of {scheme} do not state '{missing}'")
    for failure in failures:
        print(failure)
    if failures:
        return 1
    print(f"{len(PAGES)} pages state their defaults as the registry has them")
    return 0


if __name__ == "__main__":
    sys.exit(main())
