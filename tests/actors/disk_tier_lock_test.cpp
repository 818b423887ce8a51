// One disk KV tier per folder: a second one on a folder in use, in this
// process or another, fails at start naming the folder and the holder's
// pid, instead of writing over the first one's chunks; once the holder is
// gone (closed, or its process ended), the folder opens again.
#include "actors/disk_tier.hpp"
#include "gpu/kv/dir_lock.hpp"
#include "tests/temp_dir.hpp"

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

using namespace pensieve;
using pensieve::testing::TempDir;

namespace {

kv::KvPoolConfig host_layout() {
  kv::KvPoolConfig c;
  c.num_blocks = 4;
  c.block_tokens = 16;
  c.n_layers = 2;
  c.n_kv_heads = 2;
  c.head_dim = 8;
  return c;
}

Result<std::shared_ptr<actors::DiskTier>> open_tier(boost::asio::io_context& io, const TempDir& dir) {
  return actors::open_disk_tier(io.get_executor(), dir.path().string(), 1 << 20, host_layout(), 7, true);
}

}  // namespace

TEST_CASE("a second disk tier on a folder in use fails naming it and this pid, until the first closes",
          "[disk][lock]") {
  boost::asio::io_context io;
  TempDir dir("disk-lock");
  auto first = open_tier(io, dir);
  REQUIRE(first.has_value());
  auto second = open_tier(io, dir);
  REQUIRE_FALSE(second.has_value());
  const std::string& message = second.error().message;
  CHECK_THAT(message, Catch::Contains("--kv-disk-dir " + dir.path().string() + " is in use by another server"));
  CHECK_THAT(message, Catch::Contains("pid " + std::to_string(::getpid())));
  first->reset();
  auto again = open_tier(io, dir);
  CHECK(again.has_value());
}

TEST_CASE("a disk tier folder another process holds is refused with its pid, and free once it exits",
          "[disk][lock]") {
  boost::asio::io_context io;
  TempDir dir("disk-lock");
  int ready[2], release[2];
  REQUIRE(::pipe(ready) == 0);
  REQUIRE(::pipe(release) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // The holder: takes the folder, says so, and keeps it until the parent
    // closes its end of `release` (its own copy of that end goes first).
    ::close(release[1]);
    ::close(ready[0]);
    auto lock = kv::DirLock::acquire(dir.path(), "--kv-disk-dir");
    const char ok = lock ? 'y' : 'n';
    (void)!::write(ready[1], &ok, 1);
    char c = 0;
    (void)!::read(release[0], &c, 1);
    ::_exit(0);
  }
  ::close(ready[1]);
  ::close(release[0]);
  char ok = 0;
  REQUIRE(::read(ready[0], &ok, 1) == 1);
  REQUIRE(ok == 'y');
  auto refused = open_tier(io, dir);
  ::close(release[1]);  // the child exits; the kernel drops its lock with it
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  ::close(ready[0]);
  REQUIRE_FALSE(refused.has_value());
  CHECK_THAT(refused.error().message, Catch::Contains("pid " + std::to_string(child)));
  CHECK_THAT(refused.error().message, Catch::Contains(dir.path().string()));
  auto after = open_tier(io, dir);
  CHECK(after.has_value());
}
