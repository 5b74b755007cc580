#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Follows README.md's "Use it from your project", "Use it as a subproject" and "Test against an
# in-process broker" sections literally, as a new user would, in an empty directory with its own
# $HOME: every indented command block is run as written, in order, and every fenced block
# introduced by a path (`app/...`) is written to that path, or appended to it when the text says
# "added to". Nothing of the README is restated here, so a section that stops working fails this
# test.
#
#   tests/install/readme_install.sh SOURCE_DIR [SECTION...]
#
# SECTIONs ("## Debian packages", say) replace the default ones; README_EXPECT_HELLO (default 3)
# is how many times the app must print what it received, README_EXPECT_CATCH (default 1) whether
# the README's Catch2 test must have run.
set -euo pipefail
source_dir=$(cd "$1" && pwd)
shift
export README_SECTIONS
README_SECTIONS=$(printf '%s\n' "$@")
expect_hello=${README_EXPECT_HELLO:-3}
expect_catch=${README_EXPECT_CATCH:-1}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/home"
ln -s "$source_dir" "$work/polybus"

# The steps run with a $HOME of their own; ccache's objects stay where the rest of the build keeps
# them (cmake/PolybusCompilerCache.cmake), so that a rerun compiles only what changed. The
# subproject's build leaves the launcher to its user (polybus is not top level there): for that
# section CMake takes it from the environment, as from a user who compiles through ccache, with
# this run's folder as base_dir, so that the next run, in another temporary folder, hits what this
# one cached (without it, that section was a whole build of the library every run).
if command -v ccache > /dev/null; then
  if [ -z "${CCACHE_DIR:-}" ]; then
    CCACHE_DIR=$(ccache --get-config cache_dir)
    export CCACHE_DIR
  fi
  export README_SUBPROJECT_ENV="CMAKE_CXX_COMPILER_LAUNCHER=ccache CCACHE_BASEDIR=$work \
CCACHE_NOHASHDIR=true CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime"
fi

python3 - "$source_dir/README.md" > "$work/steps.sh" << 'EOF'
import os, re, shlex, sys

sections = tuple(s for s in os.environ["README_SECTIONS"].split("\n") if s) or (
    "## Use it from your project", "## Use it as a subproject", "## Test against an in-process broker")
lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
# physical: `cd polybus` (a link to the checkout) lands in the checkout's own path, so that its
# presets' build folders are the ones already configured there, not copies under another path.
out = ["set -euo pipefail", "set -o physical"]
in_section = False
i = 0
previous_text = ""
files_written = 0
commands_run = 0
while i < len(lines):
    line = lines[i]
    if line.startswith("## "):
        in_section = line.strip() in sections
        # The subproject's build compiles through ccache when the caller says so (below); no
        # other section's, so that the checkout's own preset builds keep their command lines.
        if in_section and os.environ.get("README_SUBPROJECT_ENV"):
            if line.strip() == "## Use it as a subproject":
                out.append("export " + os.environ["README_SUBPROJECT_ENV"])
            else:
                out.append("unset " + " ".join(
                    v.split("=")[0] for v in os.environ["README_SUBPROJECT_ENV"].split()))
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
if files_written < 1 or commands_run < 1 or (
        not os.environ["README_SECTIONS"] and (files_written < 5 or commands_run < 5)):
    sys.exit("README: expected the install, app, pkg-config and test steps; found %d files and "
             "%d command blocks" % (files_written, commands_run))
print("\n".join(out))
EOF

cd "$work"
# The generated steps check their own programs' exit status; the app's output is checked here.
HOME="$work/home" bash steps.sh > "$work/steps.log" 2>&1 || {
  echo "README steps failed:"
  tail -n 60 "$work/steps.log"
  exit 1
}
grep -c '^hello$' "$work/steps.log" | grep -qx "$expect_hello" || {
  echo "the app did not print what it received (expected 'hello' $expect_hello times, once per build)"
  tail -n 60 "$work/steps.log"
  exit 1
}
[ "$expect_catch" = 0 ] || grep -q "All tests passed" "$work/steps.log" || {
  echo "the README's Catch2 test did not pass"
  tail -n 60 "$work/steps.log"
  exit 1
}
grep '^+ ' "$work/steps.log"
echo "README.md's sections followed literally: ok"
