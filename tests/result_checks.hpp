#pragma once
// Catch checks for Result<T> values, which have no Catch stringification:
// a failure reports the error's message instead.
#include <catch2/catch.hpp>

#define REQUIRE_OK(expr) \
  do { \
    const auto& ok_ = (expr); \
    if (!ok_) FAIL(ok_.error().message); \
  } while (false)
#define CHECK_OK(expr) \
  do { \
    const auto& ok_ = (expr); \
    if (!ok_) FAIL_CHECK(ok_.error().message); \
  } while (false)
