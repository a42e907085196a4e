#include "client_channel.hpp"

#include <grpcpp/grpcpp.h>
#include <grpcpp/security/credentials.h>

#include <fstream>
#include <sstream>

namespace spand {

namespace {

bool read_file(const std::string& path, const std::string& flag, std::string& out,
               std::string& error) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  if (in) ss << in.rdbuf();
  if (!in || ss.str().empty()) {
    error = flag + ": cannot read '" + path + "'";
    return false;
  }
  out = ss.str();
  return true;
}

}  // namespace

std::shared_ptr<grpc::Channel> make_client_channel(const std::string& target, const ClientTls& tls,
                                                   const std::string& flag_prefix,
                                                   std::string& error) {
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    error = flag_prefix + "cert and " + flag_prefix + "key go together";
    return nullptr;
  }
  if (tls.ca_file.empty()) {
    if (!tls.cert_file.empty() || !tls.server_name.empty()) {
      error = flag_prefix + "cert, " + flag_prefix + "key and " + flag_prefix +
              "server-name need " + flag_prefix + "ca (the CA of the server's certificate)";
      return nullptr;
    }
    return grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  }
  grpc::SslCredentialsOptions ssl;
  if (!read_file(tls.ca_file, flag_prefix + "ca", ssl.pem_root_certs, error)) return nullptr;
  if (!tls.cert_file.empty() &&
      (!read_file(tls.cert_file, flag_prefix + "cert", ssl.pem_cert_chain, error) ||
       !read_file(tls.key_file, flag_prefix + "key", ssl.pem_private_key, error)))
    return nullptr;
  grpc::ChannelArguments args;
  if (!tls.server_name.empty()) args.SetSslTargetNameOverride(tls.server_name);
  return grpc::CreateCustomChannel(target, grpc::SslCredentials(ssl), args);
}

bool read_report_token(const std::string& path, const std::string& flag, std::string& token,
                       std::string& error) {
  token.clear();
  if (path.empty()) return true;
  std::string text;
  if (!read_file(path, flag, text, error)) return false;
  token = text.substr(0, text.find_first_of("\r\n"));
  if (token.empty()) {
    error = flag + ": the first line of '" + path + "' is empty";
    return false;
  }
  return true;
}

void add_report_token(grpc::ClientContext& ctx, const std::string& token) {
  if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
}

}  // namespace spand
