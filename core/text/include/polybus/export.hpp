// SPDX-License-Identifier: Apache-2.0
// POLYBUS_API marks what the polybus libraries export. They are built with hidden visibility
// (-fvisibility=hidden), so a shared libpolybus_*.so exports what its installed headers declare
// and nothing of its internals: a smaller dynamic symbol table, and internals free to change
// without breaking the ABI (README "Versions"). In a static build it changes nothing a program
// can see. ELF only: polybus builds for Linux, where one attribute serves exporting and
// importing alike.
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define POLYBUS_API __attribute__((visibility("default")))
#else
#define POLYBUS_API
#endif
