#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Debian packages as README's "Debian packages" section makes them: follows that section
# literally after "Use it from your project" (whose app it then builds against /usr, with CMake
# and with pkg-config), checks the packages with lintian (no error) and the tarballs beside them,
# then removes the packages again. As root: it installs into this machine.
#
#   tests/install/check_packages.sh SOURCE_DIR
set -euo pipefail
source_dir=$(cd "$1" && pwd)
packages=(libpolybus0 libpolybus-dev polybus-tools)
for package in "${packages[@]}"; do
  if dpkg-query -W -f='${Status}' "$package" 2> /dev/null | grep -q "install ok installed"; then
    echo "$package is installed already: this check installs and removes it, so remove it first"
    exit 1
  fi
done
remove_packages() { apt-get purge -y -qq "${packages[@]}" > /dev/null 2>&1 || true; }
trap remove_packages EXIT

# The app prints what it received four times: built against the prefix with CMake and with
# pkg-config, then against the installed packages both ways.
README_EXPECT_HELLO=4 README_EXPECT_CATCH=0 bash "$source_dir/tests/install/readme_install.sh" \
  "$source_dir" "## Use it from your project" "## Debian packages"

out=$source_dir/build/shared
version=$(dpkg-query -W -f='${Version}' libpolybus0)
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" | grep -q "install ok installed" ||
    { echo "$package was not installed"; exit 1; }
done
# What each package holds and depends on.
dpkg -L libpolybus0 | grep '/libpolybus_core\.so\.0$' > /dev/null || { echo "libpolybus0 lacks libpolybus_core.so.0"; exit 1; }
if dpkg -L libpolybus0 | grep '\.so$\|\.a$\|/include/' > /dev/null; then
  echo "libpolybus0 holds development files:"; dpkg -L libpolybus0 | grep '\.so$\|\.a$\|/include/'; exit 1
fi
for file in '/include/polybus/polybus.hpp' '/libpolybus_core\.a$' '/libpolybus_core\.so$' \
            '/libpolybus_nsq_testing\.a$' '/cmake/polybus/polybusConfig\.cmake$' \
            '/cmake/polybus/polybusTargets-shared\.cmake$' '/cmake/polybus/polybusTargets-static\.cmake$' \
            '/pkgconfig/polybus\.pc$' '/pkgconfig/polybus-testing\.pc$'; do
  dpkg -L libpolybus-dev | grep "$file" > /dev/null || { echo "libpolybus-dev lacks $file"; exit 1; }
done
dpkg -L polybus-tools | grep '^/usr/bin/polybus$' > /dev/null || { echo "polybus-tools lacks /usr/bin/polybus"; exit 1; }
for package in libpolybus-dev polybus-tools; do
  dpkg-query -W -f='${Depends}' "$package" | grep -q "libpolybus0 (= $version)" ||
    { echo "$package does not depend on libpolybus0 (= $version)"; exit 1; }
done
dpkg-query -W -f='${Depends}' libpolybus0 | grep -q 'libssl3' ||
  { echo "libpolybus0 does not declare the system libraries it links (dpkg-shlibdeps)"; exit 1; }
echo "packages: libpolybus0, libpolybus-dev and polybus-tools $version installed, each with its files: ok"

# lintian: no error (its warnings are printed, not fatal).
lintian --fail-on error --no-tag-display-limit "$out"/libpolybus0_*.deb "$out"/libpolybus-dev_*.deb \
  "$out"/polybus-tools_*.deb || { echo "lintian reports errors"; exit 1; }
echo "lintian: no errors"

# The same three as tarballs.
for archive in "libpolybus0-*:/libpolybus_core.so.0$" "libpolybus-dev-*:/include/polybus/polybus.hpp$" \
               "polybus-tools-*:/bin/polybus$"; do
  pattern=${archive%%:*}
  file=${archive#*:}
  tarball=$(ls "$out"/$pattern.tar.gz)
  # grep reads the whole listing (no -q), so that tar never dies of SIGPIPE under pipefail.
  tar -tzf "$tarball" | grep "$file" > /dev/null || { echo "$tarball lacks $file"; exit 1; }
done
echo "tarballs: ok"
