#pragma once
// Expected failures travel as values: Result<T> holds either a T or an Error
// whose message names what failed and why (a file and the problem, a bad
// argument). Faults (broken invariants) are assertions, not Errors.
#include <boost/assert/source_location.hpp>
#include <boost/system/result.hpp>

#include <stdexcept>
#include <string>
#include <utility>

namespace pensieve {

// Not constructible from a bare string, so that Result<std::string> can be
// built from a string unambiguously: make one with fail().
struct Error {
  struct from_message {};
  Error() = default;
  Error(from_message, std::string m) : message(std::move(m)) {}
  std::string message;
};

template <class T>
using Result = boost::system::result<T, Error>;

// Builds an Error; reads well at a return site: `return fail("bad magic");`.
inline Error fail(std::string message) { return Error{Error::from_message{}, std::move(message)}; }

// Called by Result<T>::value() on an error; found by argument-dependent lookup.
[[noreturn]] inline void throw_exception_from_error(Error const& e,
                                                    boost::source_location const&) {
  throw std::runtime_error(e.message);
}

}  // namespace pensieve
