#pragma once
// The streaming clients as a process of their own, so that their work
// neither competes with the server inside one process nor mixes into its CPU
// figure. fe-latency re-executes itself (/proc/self/exe) with --client-of
// PORT; the child runs run_stream_clients and writes its StreamLoad as one
// JSON object on stdout (write_client_result), which the parent reads back
// with the child's CPU time from wait4().
//
// ClientProcess owns the child: one that is still running when the object
// goes (an error, or a child past its time limit) is killed and reaped.
// One thread only.
#include "bench/common/stream_load.hpp"
#include "runtime/error.hpp"

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace pensieve::bench {

struct ClientSpec {
  std::uint16_t port = 0;
  int clients = 0;
  int seconds = 0;
  int max_tokens = 0;
  std::string model_name;  // what the requests name: the served model's
};

struct ClientResult {
  StreamLoad load;
  double cpu_s = 0;  // the child's user + system time
};

class ClientProcess {
 public:
  // Starts the child (this very program in client mode).
  static Result<ClientProcess> spawn(const ClientSpec& spec);
  ClientProcess(ClientProcess&& other) noexcept;
  ClientProcess& operator=(ClientProcess&&) = delete;
  ClientProcess(const ClientProcess&) = delete;
  ~ClientProcess();

  // Reads the child's result and reaps it; one that has not exited after
  // `limit` is killed, and so is one whose output is not a result. Call once.
  Result<ClientResult> finish(std::chrono::seconds limit);

 private:
  ClientProcess(pid_t pid, int out_fd) : pid_(pid), out_fd_(out_fd) {}
  Result<std::string> read_output(std::chrono::seconds limit);
  void kill_and_reap();

  pid_t pid_ = -1;   // -1 once reaped
  int out_fd_ = -1;  // the read end of the child's stdout
};

// Client mode: the StreamLoad as JSON on `out`.
void write_client_result(const StreamLoad& load, std::FILE* out);

}  // namespace pensieve::bench
