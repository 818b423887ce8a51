#include "gpu/kv/dir_lock.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#include <utility>

namespace pensieve::kv {

Result<DirLock> DirLock::acquire(const std::filesystem::path& dir, const std::string& what) {
  const std::filesystem::path path = dir / file_name;
  const int fd = ::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return fail("open " + path.string() + " failed: " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    std::string holder = "another process";
    char buf[32] = {};
    const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    if (n > 0) holder = "pid " + std::string(buf, std::size_t(n));
    ::close(fd);
    if (err != EWOULDBLOCK) return fail("lock " + path.string() + " failed: " + std::strerror(err));
    return fail(what + " " + dir.string() + " is in use by another server (" + holder + ", which holds " +
                path.string() + "); give each server its own folder");
  }
  // Ours now: the pid the next one's message names.
  const std::string pid = std::to_string(::getpid());
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) != ssize_t(pid.size())) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    return fail("write " + path.string() + " failed: " + why);
  }
  return DirLock(fd);
}

DirLock::DirLock(DirLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

DirLock& DirLock::operator=(DirLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

DirLock::~DirLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor drops the flock
}

}  // namespace pensieve::kv
