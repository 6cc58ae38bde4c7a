//===- DoctestMain.cpp - Entry point of every unit-test executable --------===//
//
// doctest's main, compiled once and linked into every unit-test executable.
//
//===----------------------------------------------------------------------===//

#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
