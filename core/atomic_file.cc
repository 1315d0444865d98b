#include "core/atomic_file.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace foldplan {
namespace {

std::string Why() { return std::strerror(errno); }

// Writes all of `contents` to `fd`, retrying short writes and EINTR.
bool WriteAll(int fd, const std::string& contents) {
  const char* p = contents.data();
  size_t left = contents.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return true;
}

std::string DirectoryOf(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// A character device or FIFO is written where it is: renaming a regular
// file over /dev/null would destroy it. A FIFO is opened without blocking
// so that one with no reader is an error rather than a hang.
Status WriteInPlace(const std::string& path, const struct stat& st, const std::string& contents) {
  const int flags = O_WRONLY | O_CLOEXEC | (S_ISFIFO(st.st_mode) ? O_NONBLOCK : 0);
  const int fd = ::open(path.c_str(), flags);
  if (fd < 0) {
    if (errno == ENXIO) return Status::Error(path + ": a FIFO with no reader");
    return Status::Error(path + ": cannot open for writing: " + Why());
  }
  if (S_ISFIFO(st.st_mode)) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  const bool ok = WriteAll(fd, contents);
  const std::string why = ok ? "" : Why();
  ::close(fd);
  if (!ok) return Status::Error(path + ": write failed: " + why);
  return Status();
}

}  // namespace

Status WriteFileAtomically(const std::string& path_in, const std::string& contents) {
  std::string path = path_in;
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    // Replace the file the link names, keeping the link.
    char resolved[PATH_MAX];
    if (!::realpath(path.c_str(), resolved)) {
      return Status::Error(path_in + ": cannot follow the symbolic link: " + Why());
    }
    path = resolved;
  }
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return Status::Error(path_in + ": is a directory, not a file");
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) return WriteInPlace(path, st, contents);
    if (!S_ISREG(st.st_mode)) {
      return Status::Error(path_in + ": not a regular file, a character device or a FIFO; "
                           "refusing to replace it");
    }
  }

  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return Status::Error(path_in + ": cannot create temporary file " + tmp + ": " + Why());
  // fsync before the rename: otherwise a crash can leave the new name
  // pointing at an empty file.
  const bool ok = WriteAll(fd, contents) && ::fsync(fd) == 0;
  const std::string why = ok ? "" : Why();
  if (::close(fd) != 0 || !ok) {
    ::unlink(tmp.c_str());
    return Status::Error(path_in + ": write failed: " + (ok ? Why() : why));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string rename_why = Why();
    ::unlink(tmp.c_str());
    return Status::Error(path_in + ": cannot rename temporary file into place: " + rename_why);
  }
  // The rename is durable once the directory entry is.
  const int dir = ::open(DirectoryOf(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
  return Status();
}

Result<std::string> ReadTextFile(const std::string& path, int64_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::Error(path + ": cannot open: " + Why());
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    return Status::Error(path + ": is a directory, not a file");
  }
  const std::string too_large =
      path + ": larger than " + std::to_string(max_bytes >> 20) + " MiB, the largest input file read";
  // A regular file too large is refused before any of it is read; a
  // stream (a pipe, a device) when it has sent too much.
  if (S_ISREG(st.st_mode) && st.st_size > max_bytes) {
    ::close(fd);
    return Status::Error(too_large);
  }
  std::string text;
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      const std::string why = Why();
      ::close(fd);
      return Status::Error(path + ": read failed: " + why);
    }
    if (n == 0) break;
    if (static_cast<int64_t>(text.size()) + n > max_bytes) {
      ::close(fd);
      return Status::Error(too_large);
    }
    text.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

}  // namespace foldplan
