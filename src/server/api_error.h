// Errors an API request can end in, carried as exceptions from parsing and validation up to the
// route, which turns them into an OpenAI-style JSON error with the right HTTP status.
#pragma once

#include <string>

#include "base/error.h"
#include "base/json.h"

namespace fission::server {

class ApiError : public Error {
 public:
  ApiError(int status, std::string message, std::string param = "")
      : Error(std::move(message)), status_(status), param_(std::move(param)) {}
  int status() const { return status_; }
  const std::string& param() const { return param_; }

 private:
  int status_;
  std::string param_;
};

template <typename... Args>
[[noreturn]] void BadRequest(const Args&... args) {
  throw ApiError(400, StrCat(args...));
}

// {"error": {"message", "type", "param", "code"}} as OpenAI's API answers errors.
std::string ErrorBody(int status, const std::string& message, const std::string& param = "");
// The error type name OpenAI uses for a status ("invalid_request_error", "authentication_error", ...).
std::string ErrorType(int status);

}  // namespace fission::server
