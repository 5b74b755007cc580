#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The private and protected members of every class of the installed headers, against the list
the project keeps (tests/api/private_members.txt): a member that is not on the list fails, so a
new piece of internal state in a public class is a decision someone wrote down (a pimpl, or the
list), never an accident; one on the list that is gone fails too, so the list stays true.

  check_private_members.py SOURCE_DIR          check
  check_private_members.py SOURCE_DIR --write  rewrite the list from the headers

Headers: every include/polybus/ folder of the source tree except those of the test brokers
(core/testing and */testing), which are tools, not the API, and the polybus command's support
library (tools/), which is not installed. Classes in namespace detail are
internal by name and left out. A member is one declaration, normalised to single spaces.
"""
import glob
import os
import re
import sys

LIST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "private_members.txt")


def strip(text):
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r'R"\((.*?)\)"', '""', text, flags=re.S)
    text = re.sub(r'"(\\.|[^"\\])*"', '""', text)
    text = re.sub(r"^\s*#.*$", "", text, flags=re.M)
    return text


def members(path, root):
    text = strip(open(path, encoding="utf-8").read())
    found = []
    # A stack of scopes: (kind, name, access) with kind class/struct/namespace/other.
    stack = []
    statement = ""
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "{":
            head = statement.strip()
            m = re.search(r"\b(class|struct|union)\s+(?:POLYBUS_API\s+)?(\w+)[^;{]*$", head)
            n = re.search(r"\bnamespace\s+([\w:]*)\s*$", head)
            if m and "(" not in head.split(m.group(0))[0][-1:]:
                access = "private" if m.group(1) == "class" else "public"
                stack.append(("class", m.group(2), access))
            elif n:
                stack.append(("namespace", n.group(1), None))
            else:
                stack.append(("other", head, None))  # a body or a braced initializer
            statement = ""
        elif ch == "}":
            kind, head, _ = stack.pop() if stack else ("other", "", None)
            statement = ""
            if kind == "other":
                # A braced initializer goes on to its ';' (kept as a member); a body ends here.
                rest = text[i + 1:].lstrip()
                if rest[:1] in (";", ","):
                    statement = head + "{}"
        elif ch == ";":
            decl = " ".join((statement + ";").split())
            statement = ""
            if stack and stack[-1][0] == "class" and stack[-1][2] != "public":
                names = [part for s in stack if s[0] == "namespace" for part in s[1].split("::")]
                if ("detail" not in names and decl != ";" and " friend " not in " " + decl
                        and not decl.startswith(("using ", "typedef ", "static_assert"))):
                    owner = "::".join(s[1] for s in stack if s[0] == "class")
                    found.append(f"{os.path.relpath(path, root)}: {owner}: {decl}")
        elif ch == ":" and stack and stack[-1][0] == "class":
            m = re.search(r"\b(public|private|protected)\s*$", statement)
            if m and text[i + 1:i + 2] != ":":
                kind, name, _ = stack[-1]
                stack[-1] = (kind, name, m.group(1))
                statement = ""
                i += 1
                continue
            statement += ch
        else:
            statement += ch
        i += 1
    return found


def headers(root):
    paths = []
    for folder in glob.glob(os.path.join(root, "**", "include", "polybus"), recursive=True):
        rel = os.path.relpath(folder, root)
        if rel.startswith(("build", "tools")) or "/testing/" in "/" + rel:
            continue
        paths += glob.glob(os.path.join(folder, "**", "*.hpp"), recursive=True)
    return sorted(paths)


def main(root, write):
    current = []
    for path in headers(root):
        current += members(path, root)
    if write:
        with open(LIST, "w", encoding="utf-8") as f:
            f.write("# The private and protected members of the installed headers' classes, which\n"
                    "# tests/api/check_private_members.py holds the headers to. Each line: header:\n"
                    "# class: declaration. Made with --write; a change here is a change of ABI.\n")
            f.write("\n".join(current) + "\n")
        return 0
    listed = [line for line in open(LIST, encoding="utf-8").read().splitlines()
              if line and not line.startswith("#")]
    new = sorted(set(current) - set(listed))
    gone = sorted(set(listed) - set(current))
    for line in new:
        print(f"not on the list (a pimpl, or tests/api/private_members.txt): {line}")
    for line in gone:
        print(f"on the list, gone from the headers: {line}")
    if new or gone:
        return 1
    print(f"ok: {len(current)} private members of public classes, each on the list")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], "--write" in sys.argv[2:]))
