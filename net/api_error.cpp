#include "net/api_error.hpp"

#include <boost/json.hpp>

namespace pensieve::net {

std::string ApiError::to_json() const {
  boost::json::object error{{"message", message}, {"type", type}};
  error["param"] = param.empty() ? boost::json::value(nullptr) : boost::json::value(param);
  error["code"] = code.empty() ? boost::json::value(nullptr) : boost::json::value(code);
  return boost::json::serialize(boost::json::object{{"error", std::move(error)}});
}

ApiError bad_request(std::string message, std::string param) {
  return ApiError{400, "invalid_request_error", std::move(message), std::move(param), {}};
}

ApiError not_found(std::string message, std::string code) {
  return ApiError{404, "invalid_request_error", std::move(message), {}, std::move(code)};
}

}  // namespace pensieve::net
