// FRUGAL_CHECK and FRUGAL_INTERNAL_ASSERT: violated preconditions throw, never abort.
//
// FRUGAL_CHECK(cond, parts...) guards against bad input from a caller of frugal's API; it throws
// frugal::CheckError. FRUGAL_INTERNAL_ASSERT(cond, parts...) guards frugal's own invariants; it
// throws frugal::InternalAssertError. Both messages carry file, line, the failed condition and the
// message parts (streamed with operator<<). FRUGAL_CHECK_EQ/NE/LT/LE/GT/GE also print both values.
// Expected failures (timeouts, lost peers, malformed payloads) are Status values, not checks.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace frugal {

class CheckError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

class InternalAssertError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

namespace detail {

template <typename... Parts>
std::string CheckMessage(const char* file, int line, const char* what, const Parts&... parts) {
  std::ostringstream out;
  out << file << ":" << line << ": check failed: " << what;
  if constexpr (sizeof...(parts) > 0) {
    out << ": ";
    (out << ... << parts);
  }
  return out.str();
}

template <typename A, typename B, typename... Parts>
std::string CompareMessage(const char* file, int line, const char* what, const A& a, const B& b,
                           const Parts&... parts) {
  std::ostringstream values;
  values << "(" << a << " vs. " << b << ")";
  if constexpr (sizeof...(parts) > 0) {
    values << " ";
    (values << ... << parts);
  }
  return CheckMessage(file, line, what, values.str());
}

}  // namespace detail
}  // namespace frugal

#define FRUGAL_CHECK(cond, ...)                                                      \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      throw ::frugal::CheckError(                                                    \
          ::frugal::detail::CheckMessage(__FILE__, __LINE__, #cond, ##__VA_ARGS__)); \
    }                                                                                \
  } while (false)

#define FRUGAL_INTERNAL_ASSERT(cond, ...)                                            \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      throw ::frugal::InternalAssertError(                                           \
          ::frugal::detail::CheckMessage(__FILE__, __LINE__, #cond, ##__VA_ARGS__)); \
    }                                                                                \
  } while (false)

#define FRUGAL_CHECK_OP(a, op, b, ...)                                                  \
  do {                                                                                  \
    const auto& frugal_a_ = (a);                                                        \
    const auto& frugal_b_ = (b);                                                        \
    if (!(frugal_a_ op frugal_b_)) {                                                    \
      throw ::frugal::CheckError(::frugal::detail::CompareMessage(                      \
          __FILE__, __LINE__, #a " " #op " " #b, frugal_a_, frugal_b_, ##__VA_ARGS__)); \
    }                                                                                   \
  } while (false)

#define FRUGAL_CHECK_EQ(a, b, ...) FRUGAL_CHECK_OP(a, ==, b, ##__VA_ARGS__)
#define FRUGAL_CHECK_NE(a, b, ...) FRUGAL_CHECK_OP(a, !=, b, ##__VA_ARGS__)
#define FRUGAL_CHECK_LT(a, b, ...) FRUGAL_CHECK_OP(a, <, b, ##__VA_ARGS__)
#define FRUGAL_CHECK_LE(a, b, ...) FRUGAL_CHECK_OP(a, <=, b, ##__VA_ARGS__)
#define FRUGAL_CHECK_GT(a, b, ...) FRUGAL_CHECK_OP(a, >, b, ##__VA_ARGS__)
#define FRUGAL_CHECK_GE(a, b, ...) FRUGAL_CHECK_OP(a, >=, b, ##__VA_ARGS__)
