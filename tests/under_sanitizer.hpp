#pragma once
// Whether this test build runs under ASan or TSan (GCC's macros, clang's
// __has_feature): 5-20x slower, with shadow memory and a freed-block
// quarantine in the resident set, so timing bounds loosen and RSS bounds
// are left to the release build.

namespace pensieve::testing {

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
inline constexpr bool under_sanitizer = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
inline constexpr bool under_sanitizer = true;
#else
inline constexpr bool under_sanitizer = false;
#endif
#else
inline constexpr bool under_sanitizer = false;
#endif

}  // namespace pensieve::testing
