#pragma once
// An error answered to a client: the HTTP status and the OpenAI-style body
// {"error": {"message", "type", "param", "code"}}.
#include <boost/assert/source_location.hpp>
#include <boost/system/result.hpp>

#include <stdexcept>
#include <string>

namespace pensieve::net {

struct ApiError {
  int status = 400;
  std::string type = "invalid_request_error";
  std::string message;
  std::string param;  // the offending request field, empty when none
  std::string code;   // machine-readable code, empty when none
  // Seconds for a Retry-After header (a refusal for load: 429, 503); 0: none.
  std::int32_t retry_after_s = 0;

  std::string to_json() const;
};

template <class T>
using ApiResult = boost::system::result<T, ApiError>;

[[noreturn]] inline void throw_exception_from_error(ApiError const& e,
                                                    boost::source_location const&) {
  throw std::runtime_error(e.message);
}

ApiError bad_request(std::string message, std::string param = {});
ApiError not_found(std::string message, std::string code = {});

}  // namespace pensieve::net
