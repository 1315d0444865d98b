#include "core/atomic_file.h"

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
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

// The temporary being written, for the signal handler: a fixed buffer, so
// that the handler only reads memory and calls unlink (async-signal-safe).
char g_temporary[PATH_MAX + 32];
volatile sig_atomic_t g_have_temporary = 0;
struct sigaction g_previous_int, g_previous_term;

// SIGINT or SIGTERM while a temporary exists: remove it, then die of the
// signal as the program otherwise would (the previous action, re-raised).
void RemoveTemporaryAndReraise(int sig) {
  if (g_have_temporary) ::unlink(g_temporary);
  g_have_temporary = 0;
  ::sigaction(sig, sig == SIGINT ? &g_previous_int : &g_previous_term, nullptr);
  ::raise(sig);
}

// While alive, a signal removes the temporary `path`; the previous
// handlers come back when it ends.
class TemporaryGuard {
 public:
  explicit TemporaryGuard(const std::string& path) {
    if (path.size() >= sizeof g_temporary) return;  // PATH_MAX: open fails anyway
    std::memcpy(g_temporary, path.c_str(), path.size() + 1);
    g_have_temporary = 1;
    struct sigaction action {};
    action.sa_handler = RemoveTemporaryAndReraise;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGINT, &action, &g_previous_int);
    ::sigaction(SIGTERM, &action, &g_previous_term);
    installed_ = true;
  }
  ~TemporaryGuard() {
    if (!installed_) return;
    ::sigaction(SIGINT, &g_previous_int, nullptr);
    ::sigaction(SIGTERM, &g_previous_term, nullptr);
    g_have_temporary = 0;
  }
  TemporaryGuard(const TemporaryGuard&) = delete;
  TemporaryGuard& operator=(const TemporaryGuard&) = delete;

 private:
  bool installed_ = false;
};

// Removes BASE.tmp.PID beside `path` for every PID that is no longer a
// process: what a write killed with SIGKILL (or a crash) left behind.
// A live PID's temporary is another write in progress and is kept.
void RemoveStaleTemporaries(const std::string& path) {
  const auto slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const std::string prefix = (slash == std::string::npos ? path : path.substr(slash + 1)) + ".tmp.";
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string digits = name.substr(prefix.size());
    if (digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(digits));
    if (pid <= 0 || pid == ::getpid()) continue;
    if (::kill(pid, 0) != 0 && errno == ESRCH) ::unlinkat(::dirfd(d), name.c_str(), 0);
  }
  ::closedir(d);
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

// What a file that is not a regular one is, for the refusal.
std::string NotRegularText(const struct stat& st) {
  if (S_ISDIR(st.st_mode)) return "is a directory, not a file";
  if (S_ISFIFO(st.st_mode)) return "is a FIFO (a named pipe), not a regular file";
  if (S_ISCHR(st.st_mode)) return "is a character device, not a regular file";
  if (S_ISBLK(st.st_mode)) return "is a block device, not a regular file";
  if (S_ISSOCK(st.st_mode)) return "is a socket, not a regular file";
  return "is not a regular file";
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

  const bool replacing = ::stat(path.c_str(), &st) == 0;
  RemoveStaleTemporaries(path);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const TemporaryGuard guard(tmp);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return Status::Error(path_in + ": cannot create temporary file " + tmp + ": " + Why());
  if (replacing) {
    // The new file takes the old one's place: its mode too, and its owner
    // where that is permitted (as root; otherwise the writer owns it).
    if (::geteuid() == 0) (void)::fchown(fd, st.st_uid, st.st_gid);
    (void)::fchmod(fd, st.st_mode & 07777);
  }
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
  // O_NONBLOCK: opening a FIFO with no writer would wait forever; the
  // file's kind is then known from the descriptor (no race with the name).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return Status::Error(path + ": cannot open: " + Why());
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const std::string why = Why();
    ::close(fd);
    return Status::Error(path + ": cannot stat: " + why);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::Error(path + ": " + NotRegularText(st) +
                         (S_ISDIR(st.st_mode) ? "" : "; an input must be a regular file"));
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  const std::string too_large =
      path + ": larger than " + std::to_string(max_bytes >> 20) + " MiB, the largest input file read";
  // Too large is refused before any of it is read, and again if the file
  // grows while it is read.
  if (st.st_size > max_bytes) {
    ::close(fd);
    return Status::Error(too_large);
  }
  std::string text;
  text.reserve(static_cast<size_t>(st.st_size));
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
