#pragma once
// The `pensieve` binary as a child process for tests of the real server:
// started with its stderr on a pipe, read until a line appears, signalled,
// reaped. Every wait is bounded so a broken server fails the test.
#include "tests/shared_data.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace pensieve::testing {

// The built binary; skips the test (exit 77) when it is not built.
inline std::filesystem::path pensieve_binary() {
  const auto binary = std::filesystem::path(PENSIEVE_BINARY_DIR) / "tools" / "pensieve";
  if (!std::filesystem::exists(binary)) {
    std::fprintf(stderr, "SKIPPED: %s is not built\n", binary.c_str());
    std::exit(skip_exit_code);
  }
  return binary;
}

// A pensieve child process with its stderr on a pipe.
struct PensieveChild {
  using Clock = std::chrono::steady_clock;
  pid_t pid = -1;
  int err_fd = -1;
  std::string err;  // everything read from its stderr so far

  PensieveChild(const std::filesystem::path& binary, const std::filesystem::path& cache,
                std::vector<std::string> args) {
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
  ~PensieveChild() {
    if (pid > 0 && ::waitpid(pid, nullptr, WNOHANG) == 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    if (err_fd >= 0) ::close(err_fd);
  }
  PensieveChild(const PensieveChild&) = delete;
  PensieveChild& operator=(const PensieveChild&) = delete;

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
  // Everything it has written to stderr so far, for a failure's message
  // (reads what the pipe holds, waiting at most `limit` for more).
  const std::string& stderr_text(std::chrono::milliseconds limit = std::chrono::milliseconds(200)) {
    const auto deadline = Clock::now() + limit;
    while (Clock::now() < deadline) {
      pollfd p{err_fd, POLLIN, 0};
      if (::poll(&p, 1, 10) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::read(err_fd, buf, sizeof buf);
      if (n <= 0) break;
      err.append(buf, std::size_t(n));
    }
    return err;
  }
  // The HTTP port, once the server says it serves.
  std::uint16_t http_port() {
    return std::uint16_t(
        std::stoi(wait_for(std::regex(R"(serving .* on http://127\.0\.0\.1:(\d+))"), std::chrono::seconds(120))));
  }
  std::uint16_t rpc_port() {
    return std::uint16_t(
        std::stoi(wait_for(std::regex(R"(Cap'n Proto RPC on 127\.0\.0\.1:(\d+))"), std::chrono::seconds(120))));
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

// Whether a connection to the port on 127.0.0.1 is refused (nothing listens).
inline bool refused(std::uint16_t port) {
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket s(io);
  boost::system::error_code ec;
  s.connect({boost::asio::ip::make_address("127.0.0.1"), port}, ec);
  return ec == boost::asio::error::connection_refused;
}

// Polls (bounded) until the server's HTTP listener is closed: once it is,
// the server has begun stopping (HttpServer::stop closes it first).
inline void wait_refused(std::uint16_t port, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!refused(port)) {
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace pensieve::testing
