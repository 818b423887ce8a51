#pragma once
// DirLock: one process's exclusive hold on a folder that two must never
// share (the disk KV tier's --kv-disk-dir: two servers writing one chunk
// file would overwrite each other's chunks). An flock(2) on a lock file in
// the folder, which holds the holder's pid for the message another gets.
// flock locks belong to an open file description: a second acquire() in the
// same process conflicts too, and the kernel drops the lock when the holder
// exits, however it exits (a kill -9 leaves no stale lock).
//
// Plain syscalls, at start-up; owns the lock file's descriptor.
#include "runtime/error.hpp"

#include <filesystem>
#include <string>

namespace pensieve::kv {

class DirLock {
 public:
  static constexpr const char* file_name = "pensieve.lock";

  // Takes the lock, or fails naming the folder and the holder's pid.
  // `what` names the folder's use in the message ("--kv-disk-dir").
  static Result<DirLock> acquire(const std::filesystem::path& dir, const std::string& what);
  DirLock(DirLock&& other) noexcept;
  DirLock& operator=(DirLock&& other) noexcept;
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;
  ~DirLock();

 private:
  explicit DirLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace pensieve::kv
