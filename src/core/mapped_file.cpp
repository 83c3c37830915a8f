#include "core/mapped_file.h"

#include <gizml/error.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace gizml::core {

MappedFile::MappedFile(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw Error("cannot open " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw Error("cannot map " + path + ": not a regular file");
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd_);
      throw Error("cannot map " + path + ": " + std::strerror(err));
    }
    data_ = static_cast<const uint8_t*>(p);
  }
}

void MappedFile::releasePages(const uint8_t* p, size_t n) const {
  if (!data_ || p < data_ || p + n > data_ + size_) return;
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + n) / page * page;
  // A private read-only file map: dropped pages come back from the file, never as zeros.
  if (begin < end) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

void MappedFile::copyOut(const uint8_t* p, size_t n, uint8_t* into) const {
  if (n == 0) return;
  if (!data_ || p < data_ || n > size_ || static_cast<size_t>(p - data_) > size_ - n)
    throw Error("copyOut: a range outside the map of " + path_);
  auto offset = static_cast<off_t>(p - data_);
  while (n > 0) {
    const ssize_t got = ::pread(fd_, into, n, offset);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) throw Error("cannot read " + path_ + ": " + (got < 0 ? std::strerror(errno) : "it ended early"));
    into += got, offset += got, n -= static_cast<size_t>(got);
  }
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
  ::close(fd_);
}

}  // namespace gizml::core
