// The client side of the estimate service's transport security (docs/api.md, "Security"): a
// channel to spand.v1 in plain text, over TLS (the server's certificate checked against a CA),
// or with mutual TLS (a client certificate too); and the Report bearer token. Shared by spandctl
// and spand-agent. Files are read once, when the channel is made.
#pragma once

#include <memory>
#include <string>

namespace grpc {
class Channel;
class ClientContext;
}  // namespace grpc

namespace spand {

struct ClientTls {
  std::string ca_file;      // PEM: the CA that signed the server's certificate; empty = plain text
  std::string cert_file;    // PEM: client certificate chain, for mutual TLS (with key_file)
  std::string key_file;     // PEM: its private key
  std::string server_name;  // the name the server's certificate must carry, when the target is an
                            // address the certificate does not name; empty = the target's host
};

// The channel to `target` ("host:port"); nullptr and a message naming the option (`flag_prefix`
// + "ca", "cert", "key", "server-name") on an unreadable file or a missing companion option.
std::shared_ptr<grpc::Channel> make_client_channel(const std::string& target, const ClientTls& tls,
                                                   const std::string& flag_prefix,
                                                   std::string& error);

// Report's bearer token: the first line of `path` ("" for an empty path); false with a message
// naming `flag` when the file cannot be read or its first line is empty.
bool read_report_token(const std::string& path, const std::string& flag, std::string& token,
                       std::string& error);

// Adds "authorization: Bearer <token>" to a call (nothing for an empty token).
void add_report_token(grpc::ClientContext& ctx, const std::string& token);

}  // namespace spand
