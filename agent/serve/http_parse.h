// What the agent's HTTP servers (health_server.cc, the webhook's webhook_request.h) make of a
// failed read.
#pragma once

#include <boost/beast/http/error.hpp>
#include <boost/system/error_code.hpp>

namespace ekco::agent {

// Beast's parser errors (a malformed request, a header or body too large), answered 400 or 413,
// as opposed to the connection closing or failing, answered nothing.
inline bool isHttpParseError(const boost::system::error_code& ec) {
  namespace http = boost::beast::http;
  return &ec.category() == &http::make_error_code(http::error::end_of_stream).category() &&
         ec != http::error::end_of_stream && ec != http::error::partial_message;
}

}  // namespace ekco::agent
