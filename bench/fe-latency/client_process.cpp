#include "bench/fe-latency/client_process.hpp"

#include <boost/json.hpp>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace pensieve::bench {

namespace json = boost::json;

namespace {

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

Result<StreamLoad> parse_result(const std::string& text) {
  boost::system::error_code ec;
  const json::value v = json::parse(text, ec);
  const json::object* o = ec ? nullptr : v.if_object();
  const json::value* ok = o ? o->if_contains("ok") : nullptr;
  const json::value* failed = o ? o->if_contains("failed") : nullptr;
  const json::value* first_error = o ? o->if_contains("first_error") : nullptr;
  StreamLoad load;
  if (ok && failed) {
    load.ok = ok->to_number<std::uint64_t>(ec);
    if (!ec) load.failed = failed->to_number<std::uint64_t>(ec);
  }
  if (!ok || !failed || ec || !first_error || !first_error->is_string())
    return fail("the client process wrote no result: '" + text.substr(0, 200) + "'");
  load.first_error = std::string(first_error->get_string());
  return load;
}

}  // namespace

void write_client_result(const StreamLoad& load, std::FILE* out) {
  const json::object o{{"ok", load.ok}, {"failed", load.failed}, {"first_error", load.first_error}};
  std::fprintf(out, "%s\n", json::serialize(o).c_str());
  std::fflush(out);
}

Result<ClientProcess> ClientProcess::spawn(const ClientSpec& spec) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return fail(errno_text("pipe2"));
  std::vector<std::string> args{"fe-latency",
                                "--client-of",
                                std::to_string(spec.port),
                                "--clients",
                                std::to_string(spec.clients),
                                "--seconds",
                                std::to_string(spec.seconds),
                                "--max-tokens",
                                std::to_string(spec.max_tokens),
                                "--served-model",
                                spec.model_name};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // dup2 clears close-on-exec on the child's stdout; the pipe's own ends close.
  int rc = posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  pid_t pid = -1;
  if (rc == 0) rc = ::posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    return fail(std::string("cannot start the client process: ") + std::strerror(rc));
  }
  return ClientProcess(pid, fds[0]);
}

ClientProcess::ClientProcess(ClientProcess&& other) noexcept : pid_(other.pid_), out_fd_(other.out_fd_) {
  other.pid_ = -1;
  other.out_fd_ = -1;
}

ClientProcess::~ClientProcess() {
  kill_and_reap();
  if (out_fd_ >= 0) ::close(out_fd_);
}

void ClientProcess::kill_and_reap() {
  if (pid_ < 0) return;
  ::kill(pid_, SIGKILL);
  while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
}

// Everything the child writes until it closes its stdout (it exits).
Result<std::string> ClientProcess::read_output(std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::string out;
  char buffer[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return fail("the client process did not finish within its time limit");
    pollfd p{out_fd_, POLLIN, 0};
    const int ready = ::poll(&p, 1, int(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return fail(errno_text("poll"));
    if (ready == 0) continue;  // the deadline check above ends it
    const ssize_t n = ::read(out_fd_, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(errno_text("reading the client process"));
    if (n == 0) return out;
    out.append(buffer, std::size_t(n));
  }
}

Result<ClientResult> ClientProcess::finish(std::chrono::seconds limit) {
  auto output = read_output(limit);
  if (!output) {
    kill_and_reap();
    return output.error();
  }
  int status = 0;
  rusage usage{};
  pid_t reaped = -1;
  while ((reaped = ::wait4(pid_, &status, 0, &usage)) < 0 && errno == EINTR) {
  }
  if (reaped < 0) return fail(errno_text("wait4"));
  pid_ = -1;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    const std::string how = WIFSIGNALED(status) ? "was killed by signal " + std::to_string(WTERMSIG(status))
                                                : "exited with status " + std::to_string(WEXITSTATUS(status));
    return fail("the client process " + how);
  }
  auto load = parse_result(*output);
  if (!load) return load.error();
  ClientResult result;
  result.load = std::move(*load);
  result.cpu_s = double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                 1e-6 * double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
  return result;
}

}  // namespace pensieve::bench
