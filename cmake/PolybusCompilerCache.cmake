# SPDX-License-Identifier: Apache-2.0
# Compiles through ccache when it is installed (POLYBUS_CCACHE, on by default for a top-level
# build). Three full builds of the same sources (release, ASan+UBSan, TSan) plus the fuzzers and
# the README's own build are most of a test run; once the cache holds an object, a rebuild of it
# takes a lookup instead of a compilation.
#
# The settings make a hit independent of where the checkout lies, so that a fresh clone in
# another folder (CI's, or a second worktree) reuses what the last one compiled:
# - base_dir is the folder above the checkout, so the source and build paths that ccache hashes
#   are relative (also for a build folder beside the checkout, as in README.md's steps);
# - hash_dir off: with -g the compiler's working directory would otherwise be hashed too (the
#   debug information then names the folder of the build that filled the cache);
# - sloppiness for the precompiled headers (cmake/PolybusPrecompiledHeaders.cmake): ccache hashes
#   the .gch itself, so its timestamps and the macros defined before it may be ignored.
# A launcher set by the user (CMAKE_CXX_COMPILER_LAUNCHER, as a variable or in the environment)
# is kept as it is.
option(POLYBUS_CCACHE "Compile through ccache when it is installed" ${PROJECT_IS_TOP_LEVEL})
if(POLYBUS_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  find_program(POLYBUS_CCACHE_PROGRAM ccache)
  if(POLYBUS_CCACHE_PROGRAM)
    get_filename_component(polybus_ccache_base "${PROJECT_SOURCE_DIR}/.." ABSOLUTE)
    set(polybus_ccache_env CCACHE_NOHASHDIR=true
        CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime)
    if(NOT DEFINED ENV{CCACHE_BASEDIR} AND NOT polybus_ccache_base STREQUAL "/")
      list(APPEND polybus_ccache_env CCACHE_BASEDIR=${polybus_ccache_base})
    endif()
    # A sanitizer's ignore list is named by an absolute path in the flags (the fuzz preset's),
    # which ccache would hash as it stands, so that no other checkout could hit: the option is
    # left out of the hash and the file's content hashed instead.
    if(CMAKE_CXX_FLAGS MATCHES "-fsanitize-ignorelist=([^ ]+)")
      list(APPEND polybus_ccache_env "CCACHE_IGNOREOPTIONS=-fsanitize-ignorelist=*"
           CCACHE_EXTRAFILES=${CMAKE_MATCH_1})
    endif()
    set(CMAKE_CXX_COMPILER_LAUNCHER ${CMAKE_COMMAND} -E env ${polybus_ccache_env}
                                    ${POLYBUS_CCACHE_PROGRAM})
    message(STATUS "polybus: compiling through ${POLYBUS_CCACHE_PROGRAM}")
  endif()
endif()
