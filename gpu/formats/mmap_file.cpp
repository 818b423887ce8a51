#include "gpu/formats/mmap_file.hpp"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace pensieve::model {

namespace {

Error os_error(const std::filesystem::path& path, const char* what) {
  return fail(path.string() + ": " + what + ": " + std::strerror(errno));
}

}  // namespace

Result<std::shared_ptr<const MappedFile>> MappedFile::open(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return os_error(path, "cannot open");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    auto err = os_error(path, "cannot stat");
    ::close(fd);
    return err;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return fail(path.string() + ": not a regular file");
  }
  const auto size = static_cast<std::size_t>(st.st_size);
  const std::byte* data = nullptr;
  if (size > 0) {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      auto err = os_error(path, "cannot mmap");
      ::close(fd);
      return err;
    }
    data = static_cast<const std::byte*>(p);
  }
  ::close(fd);  // the mapping keeps the file alive
  return std::shared_ptr<const MappedFile>(new MappedFile(path, data, size));
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_bytes_);
}

}  // namespace pensieve::model
