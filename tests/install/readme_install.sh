#!/usr/bin/env bash
# Follows README.md's "Use it from your project" and "Test against an in-process broker" sections
# literally, as a new user would, in an empty directory with its own $HOME: every indented command
# block is run as written, in order, and every fenced block introduced by a path (`app/...`) is
# written to that path, or appended to it when the text says "added to". Nothing of the README is
# restated here, so a section that stops working fails this test.
#
#   tests/install/readme_install.sh SOURCE_DIR
set -euo pipefail
source_dir=$(cd "$1" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/home"
ln -s "$source_dir" "$work/polybus"

python3 - "$source_dir/README.md" > "$work/steps.sh" << 'EOF'
import re, shlex, sys

sections = ("## Use it from your project", "## Test against an in-process broker")
lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
out = ["set -euo pipefail"]
in_section = False
i = 0
previous_text = ""
files_written = 0
commands_run = 0
while i < len(lines):
    line = lines[i]
    if line.startswith("## "):
        in_section = line.strip() in sections
        i += 1
        continue
    if not in_section:
        i += 1
        continue
    if line.startswith("```"):
        block = []
        i += 1
        while not lines[i].startswith("```"):
            block.append(lines[i])
            i += 1
        i += 1
        paths = re.findall(r"`(app/[^`]+)`", previous_text)
        if not paths:
            sys.exit("README: a code block with no app/ path before it: " + block[0])
        path = paths[-1]
        append = "added to" in previous_text
        out.append("mkdir -p %s" % shlex.quote(path.rsplit("/", 1)[0]))
        out.append("cat %s %s << 'README_BLOCK'" % (">>" if append else ">", shlex.quote(path)))
        out.extend(block)
        out.append("README_BLOCK")
        files_written += 1
        previous_text = ""
        continue
    if line.startswith("    ") and line.strip():
        block = []
        while i < len(lines) and (lines[i].startswith("    ") or lines[i].rstrip().endswith("\\")):
            block.append(lines[i][4:])
            i += 1
        out.append("echo '+ %s'" % block[0].replace("'", "'\\''"))
        out.extend(block)
        commands_run += 1
        previous_text = ""
        continue
    if line.strip():
        previous_text = (previous_text + " " + line) if previous_text else line
    i += 1
if files_written < 4 or commands_run < 4:
    sys.exit("README: expected the install, app, pkg-config and test steps; found %d files and "
             "%d command blocks" % (files_written, commands_run))
print("\n".join(out))
EOF

cd "$work"
# The steps run with a $HOME of their own; ccache's objects stay where the rest of the build keeps
# them (cmake/PolybusCompilerCache.cmake), so that a rerun compiles only what changed.
if command -v ccache > /dev/null && [ -z "${CCACHE_DIR:-}" ]; then
  CCACHE_DIR=$(ccache --get-config cache_dir)
  export CCACHE_DIR
fi
# The generated steps check their own programs' exit status; the app's output is checked here.
HOME="$work/home" bash steps.sh > "$work/steps.log" 2>&1 || {
  echo "README steps failed:"
  tail -n 60 "$work/steps.log"
  exit 1
}
grep -c '^hello$' "$work/steps.log" | grep -qx 2 || {
  echo "the app did not print what it received (expected 'hello' from the CMake and the pkg-config build)"
  tail -n 60 "$work/steps.log"
  exit 1
}
grep -q "All tests passed" "$work/steps.log" || {
  echo "the README's Catch2 test did not pass"
  tail -n 60 "$work/steps.log"
  exit 1
}
grep '^+ ' "$work/steps.log"
echo "README.md's install and in-process test sections, followed literally: ok"
