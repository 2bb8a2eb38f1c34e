#include "server/api_error.h"

namespace fission::server {

std::string ErrorType(int status) {
  switch (status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 405: return "invalid_request_error";
    case 413: return "invalid_request_error";
    case 503: return "server_overloaded";
    default: return status >= 500 ? "internal_server_error" : "invalid_request_error";
  }
}

std::string ErrorBody(int status, const std::string& message, const std::string& param) {
  // Messages quote values from the request; the cap keeps any answer small whatever was sent.
  Json error = {{"message", Abbreviate(message, 2048)}, {"type", ErrorType(status)}, {"code", status}};
  error["param"] = param.empty() ? Json(nullptr) : Json(Abbreviate(param));
  return Json{{"error", error}}.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace fission::server
