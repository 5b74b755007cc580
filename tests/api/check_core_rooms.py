#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The core's rooms (core/CMakeLists.txt, docs/architecture.md) may include only downwards.

For each room, a file compiled with exactly that room's flags (taken from the build's
compile_commands.json) includes one header of every room in turn: the rooms it links must
compile, and every other room's header must not be found. A room's src/ headers are seen by the
core rooms above it, never by the testing room, the adapters or applications (which see the
include/ folders).

The paths say the rooms too: a header under core/<room>/include/polybus/<dir>/ has <dir> named
for its room (api also holds the Asio face, polybus/asio/), and only the rooms whose headers
applications include put headers at the top, polybus/<name>.hpp.

    check_core_rooms.py BUILD_DIR
"""
import concurrent.futures
import json
import os
import shlex
import subprocess
import sys
import tempfile

# What each room links, directly or through another: what it may include.
BELOW = {
    "text": set(),
    "api": {"text"},
    "adapter": {"api", "text"},
    "io": {"adapter", "api", "text"},
    "metrics": {"adapter", "api", "text"},
    "envelope": {"adapter", "api", "text"},
    "client": {"metrics", "envelope", "adapter", "api", "text"},
    "testing": {"io", "metrics", "envelope", "adapter", "api", "text"},  # polybus::core's headers
}
CORE_ROOMS = set(BELOW) - {"testing"}  # the rooms that see the src/ headers of those below

# (room, header, internal): an installed header or a src/ header of each room.
HEADERS = [
    ("text", "polybus/text/text.hpp", False),
    ("text", "polybus/error.hpp", False),
    ("api", "polybus/client.hpp", False),
    ("adapter", "polybus/adapter/adapter.hpp", False),
    ("adapter", "block_pool.hpp", True),
    ("io", "polybus/io/transport.hpp", False),
    ("metrics", "polybus/metrics/counters_by_name.hpp", False),
    ("metrics", "metric_cells.hpp", True),
    ("envelope", "polybus/cloudevents.hpp", False),
    ("envelope", "envelope.hpp", True),
    ("client", "client_core.hpp", True),
    ("testing", "polybus/testing.hpp", False),
]


# The folders under polybus/ a room's include/ may hold besides its own name.
EXTRA_DIRS = {"api": {"asio"}}
# The rooms with headers at polybus/<name>.hpp: what applications and tests include.
TOP_LEVEL = {"api", "text", "envelope", "testing"}


def path_failures(core_dir):
    """Headers whose include path does not name the room that holds them."""
    failures = []
    for room in sorted(BELOW):
        top = os.path.join(core_dir, room, "include", "polybus")
        if not os.path.isdir(top):
            continue
        for entry in sorted(os.listdir(top)):
            path = os.path.join(top, entry)
            if os.path.isdir(path):
                if entry != room and entry not in EXTRA_DIRS.get(room, set()):
                    failures.append(f"core/{room} holds headers under polybus/{entry}/, a path "
                                    f"that names another room")
            elif room not in TOP_LEVEL:
                failures.append(f"core/{room} puts polybus/{entry} at the top; its headers "
                                f"belong under polybus/{room}/")
    return failures


def visible(room, header_room, internal):
    if header_room == room:
        return True
    if header_room not in BELOW[room]:
        return False
    return not internal or room in CORE_ROOMS


def room_flags(build_dir):
    """The flags one source of each room compiles with, without its output and source."""
    with open(os.path.join(build_dir, "compile_commands.json")) as f:
        commands = json.load(f)
    flags = {}
    for entry in commands:
        path = entry["file"].replace(os.sep, "/")
        for room in BELOW:
            if f"/core/{room}/src/" in path and path.endswith(".cpp") and room not in flags:
                args = shlex.split(entry["command"]) if "command" in entry else entry["arguments"]
                kept, skip = [], False
                for arg in args:
                    if skip:
                        skip = False
                    elif arg in ("-o", "-c", "-MT", "-MF"):
                        skip = True
                    elif arg not in ("-MD", entry["file"]):
                        kept.append(arg)
                flags[room] = (kept, entry["directory"])
    missing = set(BELOW) - set(flags)
    if missing:
        sys.exit(f"FAIL: no compile command for the room(s) {sorted(missing)} in {build_dir}")
    return flags


def compiles(room, flags, directory, header, work):
    source = os.path.join(work, f"{room}-{header.replace('/', '_')}.cpp")
    with open(source, "w") as f:
        f.write(f'#include "{header}"\nint main() {{ return 0; }}\n')
    result = subprocess.run(flags + ["-fsyntax-only", source], cwd=directory,
                            capture_output=True, text=True)
    return result.returncode == 0, result.stderr


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    flags = room_flags(sys.argv[1])
    core_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "core")
    failures = path_failures(core_dir)
    with tempfile.TemporaryDirectory() as work, concurrent.futures.ThreadPoolExecutor(2) as pool:
        jobs = {}
        for room, (room_args, directory) in flags.items():
            for header_room, header, internal in HEADERS:
                jobs[(room, header_room, header, internal)] = pool.submit(
                    compiles, room, room_args, directory, header, work)
        for (room, header_room, header, internal), job in sorted(jobs.items()):
            ok, errors = job.result()
            expected = visible(room, header_room, internal)
            if ok != expected:
                what = "compiles" if ok else "does not compile"
                first = next((l for l in errors.splitlines() if "error" in l), "")
                failures.append(f"{room} including {header} ({header_room}) {what}"
                                + (f": {first}" if first else ""))
            elif not ok and "No such file" not in errors:
                failures.append(f"{room} including {header} ({header_room}) fails, but not for "
                                f"want of the header: {errors.splitlines()[:2]}")
    for line in failures:
        print("FAIL:", line)
    if failures:
        return 1
    print(f"ok: {len(flags)} rooms x {len(HEADERS)} headers, each seen only from where it may be, "
          "each under a path naming its room")
    return 0


if __name__ == "__main__":
    sys.exit(main())
