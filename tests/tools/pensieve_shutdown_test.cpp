// The `pensieve` binary on SIGTERM: it stops accepting at once, lets a
// streamed reply in flight finish (within --shutdown-grace-s), and exits 0.
#include "tests/shared_data.hpp"
#include "tests/temp_dir.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <string>
#include <thread>
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

namespace fs = std::filesystem;
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

// A pensieve child process with its stderr on a pipe.
struct Child {
  pid_t pid = -1;
  int err_fd = -1;
  std::string err;  // everything read from its stderr so far

  Child(const fs::path& binary, const fs::path& cache, std::vector<std::string> args) {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::dup2(fds[1], 2);
      ::close(fds[0]);
      ::close(fds[1]);
      ::setenv("XDG_CACHE_HOME", cache.c_str(), 1);
      std::vector<char*> argv{const_cast<char*>(binary.c_str())};
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(binary.c_str(), argv.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    err_fd = fds[0];
  }
  ~Child() {
    if (pid > 0 && ::waitpid(pid, nullptr, WNOHANG) == 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    if (err_fd >= 0) ::close(err_fd);
  }
  // Reads stderr until `pattern` matches (bounded); returns the match's first group.
  std::string wait_for(const std::regex& pattern, std::chrono::seconds limit) {
    const auto deadline = Clock::now() + limit;
    std::smatch m;
    while (!std::regex_search(err, m, pattern)) {
      REQUIRE(Clock::now() < deadline);
      pollfd p{err_fd, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::read(err_fd, buf, sizeof buf);
      REQUIRE(n > 0);  // the server exited before printing it
      err.append(buf, std::size_t(n));
    }
    return m[1];
  }
  // The exit status once it exits, or -1 past the limit.
  int wait_exit(std::chrono::seconds limit) {
    const auto deadline = Clock::now() + limit;
    while (Clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        pid = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return -1;
  }
  bool running() const { return pid > 0 && ::waitpid(pid, nullptr, WNOHANG) == 0; }
};

bool refused(std::uint16_t port) {
  asio::io_context io;
  tcp::socket s(io);
  boost::system::error_code ec;
  s.connect({asio::ip::make_address("127.0.0.1"), port}, ec);
  return ec == asio::error::connection_refused;
}

}  // namespace

TEST_CASE("SIGTERM lets a streamed reply finish, refuses new connections and exits 0", "[tools][shutdown]") {
  const auto binary = fs::path(PENSIEVE_BINARY_DIR) / "tools" / "pensieve";
  if (!fs::exists(binary)) {
    std::fprintf(stderr, "SKIPPED: %s is not built\n", binary.c_str());
    std::exit(pensieve::testing::skip_exit_code);
  }
  pensieve::testing::TempDir cache("pensieve-shutdown");
  Child server(binary, cache.path(),
               {"--port", "0", "--rpc-port", "0", "--threads", "1", "--kv-device-mb", "64", "--shutdown-grace-s", "30"});
  const auto port = std::uint16_t(
      std::stoi(server.wait_for(std::regex(R"(serving .* on http://127\.0\.0\.1:(\d+))"), std::chrono::seconds(120))));

  asio::io_context io;
  tcp::socket stream(io);
  stream.connect({asio::ip::make_address("127.0.0.1"), port});
  http::request<http::string_body> req{http::verb::post, "/v1/chat/completions", 11};
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::content_type, "application/json");
  req.body() = R"({"model":"pensieve-builtin","messages":[{"role":"user","content":"Tell me a story"}],)"
               R"("max_tokens":1000,"ignore_eos":true,"temperature":0,"stream":true})";
  req.prepare_payload();
  http::write(stream, req);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 << 20);
  http::read_header(stream, buffer, parser);
  REQUIRE(parser.get().result_int() == 200);

  const auto signalled = Clock::now();
  REQUIRE(::kill(server.pid, SIGTERM) == 0);
  server.wait_for(std::regex("(stopping)"), std::chrono::seconds(30));
  // New connections are refused while the reply still streams.
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (!refused(port)) {
    REQUIRE(Clock::now() < deadline);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  CHECK(server.running());
  boost::system::error_code ec;
  http::read(stream, buffer, parser, ec);
  CHECK_FALSE(ec);
  const std::string& body = parser.get().body();
  CHECK(body.find(R"("finish_reason":"length")") != std::string::npos);
  CHECK(body.ends_with("data: [DONE]\n\n"));
  CHECK(server.wait_exit(std::chrono::seconds(30)) == 0);
  CHECK(Clock::now() - signalled < std::chrono::seconds(30));
}
