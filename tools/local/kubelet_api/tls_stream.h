// The TLS connection type every part of the kubelet API server shares. Its socket is created on a
// strand of the server's io_context, and so are the timers, pipes and sockets a connection's
// sessions open: every completion handler of one client connection runs on that strand, one at a
// time, so per-connection state needs no lock.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <memory>
#include <utility>

namespace mf::local {

class TlsStream : public boost::asio::ssl::stream<boost::asio::ip::tcp::socket> {
 public:
  // `connection_slot` holds this connection's place in the server's connection limit until the
  // stream is destroyed, whichever part of the server owns it by then.
  TlsStream(boost::asio::ip::tcp::socket socket, boost::asio::ssl::context& context,
            std::shared_ptr<void> connection_slot)
      : boost::asio::ssl::stream<boost::asio::ip::tcp::socket>(std::move(socket), context),
        connection_slot_(std::move(connection_slot)) {}

 private:
  std::shared_ptr<void> connection_slot_;
};

}  // namespace mf::local
