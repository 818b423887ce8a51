// loopback-floor: the least a server can add to a streamed token on this
// machine, with no HTTP, JSON, Asio or engine in the way. A child process
// holds --clients TCP connections on loopback and reads them with epoll (as
// fe-latency's clients do); the parent, every --step-us, writes one SSE-sized
// chunk (--bytes) to every connection from --threads sender threads (the
// connections split evenly), and records for each write the time from the
// step's start to the send() returning: what fe-latency calls the front
// end's added latency, for a front end that does nothing but the syscall.
// Loopback runs the receiver's TCP path inside the sender's send(), so this
// is the floor for clients on the same machine. --busy N adds N threads that
// spin in the SCHED_IDLE class all along, as the engine's compute threads do
// under `--compute-nice idle`: what a token's delivery costs while the cores
// also compute.
//
//   loopback-floor --clients 200 --threads 1,2 --busy 0,2 --seconds 5 [--out FILE.json]
#include "bench/common/machine_info.hpp"
#include "bench/common/quantiles.hpp"
#include "runtime/thread_priority.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  int clients = 200;
  std::vector<int> threads{1, 2};
  std::vector<int> busy{0};
  double seconds = 5;
  int step_us = 5000;
  int bytes = 180;
  std::string out;
};

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "loopback-floor: %s\n", why.c_str());
  std::exit(2);
}

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> v;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) v.push_back(std::stoi(item));
  return v;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) die("missing value for " + flag);
    const std::string v = argv[++i];
    try {
      if (flag == "--clients") a.clients = std::stoi(v);
      else if (flag == "--threads") a.threads = parse_list(v);
      else if (flag == "--busy") a.busy = parse_list(v);
      else if (flag == "--seconds") a.seconds = std::stod(v);
      else if (flag == "--step-us") a.step_us = std::stoi(v);
      else if (flag == "--bytes") a.bytes = std::stoi(v);
      else if (flag == "--out") a.out = v;
      else die("unknown flag " + flag);
    } catch (const std::logic_error&) {
      die("bad value for " + flag + ": " + v);
    }
  }
  if (a.clients < 1 || a.bytes < 1 || a.step_us < 100 || a.threads.empty() || a.busy.empty())
    die("bad arguments");
  return a;
}

// The clients: connect, then read everything until the parent closes.
[[noreturn]] void run_clients(std::uint16_t port, int n) {
  const int ep = ::epoll_create1(0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int i = 0; i < n; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) _exit(3);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (::epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) _exit(3);
  }
  std::vector<epoll_event> events(static_cast<std::size_t>(n));
  std::vector<char> buf(1 << 16);
  for (int open = n; open > 0;) {
    const int k = ::epoll_wait(ep, events.data(), n, -1);
    for (int i = 0; i < k; ++i) {
      const ssize_t r = ::read(events[std::size_t(i)].data.fd, buf.data(), buf.size());
      if (r == 0) {
        ::close(events[std::size_t(i)].data.fd);
        --open;
      }
    }
  }
  _exit(0);
}

// Threads spinning in the idle class while they live.
class Spinners {
 public:
  explicit Spinners(int n) {
    for (int i = 0; i < n; ++i) {
      threads_.emplace_back([this] {
        pensieve::rt::lower_this_thread_priority(pensieve::rt::kIdleClass);
        volatile std::uint64_t x = 0;
        while (!stop_.load(std::memory_order_relaxed)) x = x + 1;
      });
    }
  }
  ~Spinners() {
    stop_.store(true);
    for (auto& t : threads_) t.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

struct Result {
  int threads;
  std::size_t steps = 0;
  std::vector<double> us;  // every write: step start -> send() returned
};

// Steps of writes to every connection from n_threads threads; the thread
// that starts a step takes part as thread 0.
Result run_steps(const std::vector<int>& fds, int n_threads, const Args& a) {
  Result res{n_threads, 0, {}};
  std::atomic<std::uint64_t> step{0};
  std::atomic<int> done{0};
  std::atomic<bool> stop{false};
  Clock::time_point start;
  std::vector<std::vector<double>> samples(static_cast<std::size_t>(n_threads));
  const std::string chunk = [&] {
    std::string body = "data: " + std::string(std::size_t(std::max(1, a.bytes - 12)), 'x') + "\n\n";
    char head[16];
    std::snprintf(head, sizeof head, "%zx\r\n", body.size());
    return std::string(head) + body + "\r\n";
  }();
  auto share = [&](int t) {
    const std::size_t b = fds.size() * std::size_t(t) / std::size_t(n_threads);
    const std::size_t e = fds.size() * std::size_t(t + 1) / std::size_t(n_threads);
    for (std::size_t i = b; i < e; ++i) {
      if (::send(fds[i], chunk.data(), chunk.size(), MSG_NOSIGNAL) != ssize_t(chunk.size())) die("short send");
      samples[std::size_t(t)].push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    }
  };
  std::vector<std::thread> workers;
  for (int t = 1; t < n_threads; ++t) {
    workers.emplace_back([&, t] {
      std::uint64_t seen = 0;
      for (;;) {
        std::uint64_t s;
        while ((s = step.load(std::memory_order_acquire)) == seen) step.wait(seen);
        seen = s;
        if (stop.load()) return;
        share(t);
        done.fetch_add(1, std::memory_order_release);
      }
    });
  }
  const auto until = Clock::now() + std::chrono::duration<double>(a.seconds);
  auto next = Clock::now();
  while (next < until) {
    std::this_thread::sleep_until(next);
    start = Clock::now();
    done.store(0);
    step.fetch_add(1, std::memory_order_release);
    step.notify_all();
    share(0);
    while (done.load(std::memory_order_acquire) != n_threads - 1) std::this_thread::yield();
    ++res.steps;
    next += std::chrono::microseconds(a.step_us);
    if (next < Clock::now()) next = Clock::now();
  }
  stop.store(true);
  step.fetch_add(1);
  step.notify_all();
  for (auto& w : workers) w.join();
  for (auto& s : samples) res.us.insert(res.us.end(), s.begin(), s.end());
  return res;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  const int lfd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(lfd, 4096) != 0 ||
      ::getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    die(std::string("listen: ") + std::strerror(errno));
  const pid_t child = ::fork();
  if (child == 0) run_clients(ntohs(addr.sin_port), a.clients);
  std::vector<int> fds;
  for (int i = 0; i < a.clients; ++i) {
    const int fd = ::accept(lfd, nullptr, nullptr);
    if (fd < 0) die(std::string("accept: ") + std::strerror(errno));
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fds.push_back(fd);
  }
  std::ostringstream json;
  json << "{\"command\":\"";
  for (int i = 0; i < argc; ++i) json << (i ? " " : "") << argv[i];
  json << "\",\"load_average\":\"" << pensieve::bench::load_average() << "\",\"runs\":[";
  std::printf("%d clients, one %d-byte chunk each every %d us, %.0f s per setting\n", a.clients, a.bytes,
              a.step_us, a.seconds);
  std::printf("| sender threads | idle-class spinners | steps | writes | p50 us | p99 us | p999 us |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  bool first = true;
  for (int b : a.busy) {
    for (int n : a.threads) {
      Spinners spin(b);
      Result r = run_steps(fds, std::max(1, n), a);
      const std::size_t writes = r.us.size();
      const pensieve::bench::Quantiles q = pensieve::bench::quantiles(r.us);
      std::printf("| %d | %d | %zu | %zu | %.0f | %.0f | %.0f |\n", n, b, r.steps, writes, q.p50,
                  q.p99, q.p999);
      json << (first ? "" : ",") << "{\"threads\":" << n << ",\"spinners\":" << b
           << ",\"steps\":" << r.steps << ",\"writes\":" << writes << ",\"p50_us\":" << q.p50
           << ",\"p99_us\":" << q.p99 << ",\"p999_us\":" << q.p999 << "}";
      first = false;
    }
  }
  json << "]}\n";
  for (int fd : fds) ::close(fd);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (!a.out.empty()) std::ofstream(a.out) << json.str();
  return 0;
}
