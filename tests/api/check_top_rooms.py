#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""tools/, bench/ and samples/ stand apart: none reaches into another by a private path.

What two of them share goes into a library both link, and is included through that library's
own include path (tools' support library: "polybus/tools/..."; the bench's library:
"bench/..."). A quoted include or a shell `source` that names another room's folder, or climbs
out of its own with "..", is refused with the file and line.

Usage: check_top_rooms.py SOURCE_DIR
"""
import pathlib
import re
import sys

ROOMS = ["tools", "bench", "samples"]
# Include roots that are a library's interface, not a private path: the installed headers and
# tools' support library ("polybus/..."), and the bench's library ("bench/...").
LIBRARY_ROOTS = ("polybus/", "bench/")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCE = re.compile(r'^\s*(?:source|\.)\s+(.+)$')


def include_reaches_out(root, room, path, target):
    """A quoted include is the file's own folder's, its room's, or a library's interface."""
    if target.startswith(LIBRARY_ROOTS):
        return False
    if ".." in pathlib.PurePosixPath(target).parts:
        return True
    return not ((path.parent / target).is_file() or (root / room / target).is_file())


def source_reaches_out(room, text):
    """A sourced script is not another room's."""
    parts = set(re.split(r"[/\"'$()\s]+", text))
    return any(other in parts for other in ROOMS if other != room)


def main():
    root = pathlib.Path(sys.argv[1])
    failures = []
    files = 0
    for room in ROOMS:
        for path in sorted((root / room).rglob("*")):
            if path.suffix not in (".cpp", ".hpp", ".h", ".sh") or not path.is_file():
                continue
            files += 1
            shell = path.suffix == ".sh"
            for number, line in enumerate(path.read_text().splitlines(), 1):
                m = (SOURCE if shell else INCLUDE).match(line)
                if not m:
                    continue
                if (source_reaches_out(room, m.group(1)) if shell else
                        include_reaches_out(root, room, path, m.group(1))):
                    failures.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    for failure in failures:
        print(failure)
    if failures:
        print("tools/, bench/ and samples/ share code through a library both link, not by path")
        return 1
    print(f"{files} files of tools/, bench/ and samples/ include nothing of another by path")
    return 0


if __name__ == "__main__":
    sys.exit(main())
