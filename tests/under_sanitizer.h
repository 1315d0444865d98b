// Whether this program is built with AddressSanitizer (`make sanitize`).
// The few tests that do less there say what and why where they read it.
#pragma once

namespace foldplan::testing {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kUnderAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kUnderAsan = true;
#else
inline constexpr bool kUnderAsan = false;
#endif
#else
inline constexpr bool kUnderAsan = false;
#endif

}  // namespace foldplan::testing
