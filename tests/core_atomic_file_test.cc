// core/atomic_file.h: an output replaces a regular file whole (never a half
// file), a device or FIFO is written in place instead of being replaced, a
// directory is refused; input reads are bounded and refuse directories.
#include <doctest/doctest.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <fcntl.h>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "core/atomic_file.h"

using foldplan::ReadTextFile;
using foldplan::WriteFileAtomically;
namespace fs = std::filesystem;

namespace {

fs::path FreshDir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("foldplan_atomic_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

}  // namespace

TEST_CASE("writing a file replaces it whole and leaves no temporary behind") {
  const fs::path dir = FreshDir("replace");
  const std::string file = (dir / "out.json").string();
  REQUIRE(WriteFileAtomically(file, "old").ok());
  REQUIRE(WriteFileAtomically(file, "new contents").ok());
  CHECK(ReadTextFile(file).value() == "new contents");
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++entries;
  CHECK(entries == 1);
  fs::remove_all(dir);
}

TEST_CASE("writing to /dev/null writes in place and leaves the device a device") {
  REQUIRE(WriteFileAtomically("/dev/null", "anything").ok());
  struct stat st {};
  REQUIRE(::stat("/dev/null", &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
}

TEST_CASE("writing through a symbolic link replaces the file it names and keeps the link") {
  const fs::path dir = FreshDir("link");
  const fs::path target = dir / "real.json";
  REQUIRE(WriteFileAtomically(target.string(), "old").ok());
  fs::create_symlink(target, dir / "link.json");
  REQUIRE(WriteFileAtomically((dir / "link.json").string(), "new").ok());
  CHECK(fs::is_symlink(dir / "link.json"));
  CHECK(ReadTextFile(target.string()).value() == "new");
  fs::remove_all(dir);
}

TEST_CASE("writing onto a directory is refused and the directory is untouched") {
  const fs::path dir = FreshDir("dir");
  auto s = WriteFileAtomically(dir.string(), "x");
  REQUIRE(!s.ok());
  CHECK(s.message() == dir.string() + ": is a directory, not a file");
  CHECK(fs::is_directory(dir));
  fs::remove_all(dir);
}

TEST_CASE("writing to a FIFO with no reader is an error, not a hang; with a reader it is written in place") {
  const fs::path dir = FreshDir("fifo");
  const std::string fifo = (dir / "pipe").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  auto alone = WriteFileAtomically(fifo, "x");
  REQUIRE(!alone.ok());
  CHECK(alone.message() == fifo + ": a FIFO with no reader");

  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  REQUIRE(reader >= 0);
  REQUIRE(WriteFileAtomically(fifo, "through the pipe").ok());
  char buffer[64] = {};
  CHECK(::read(reader, buffer, sizeof buffer) == 16);
  CHECK(std::string(buffer) == "through the pipe");
  ::close(reader);
  CHECK(fs::is_fifo(fifo));
  fs::remove_all(dir);
}

TEST_CASE("writing into a directory that does not exist fails and creates nothing") {
  auto s = WriteFileAtomically("/nonexistent-foldplan-dir/x.json", "x");
  REQUIRE(!s.ok());
  CHECK(s.message().rfind("/nonexistent-foldplan-dir/x.json: cannot create temporary file", 0) == 0);
}

TEST_CASE("reading a directory or an endless device is refused") {
  auto dir = ReadTextFile("/tmp");
  REQUIRE(!dir.ok());
  CHECK(dir.status().message() == "/tmp: is a directory, not a file");
  // The bound is a parameter so that the test needs 4 MiB, not 1 GiB.
  auto zero = ReadTextFile("/dev/zero", int64_t{4} << 20);
  REQUIRE(!zero.ok());
  CHECK(zero.status().message() ==
        "/dev/zero: is a character device, not a regular file; an input must be a regular file");
  CHECK(foldplan::kMaxInputFileBytes == int64_t{1} << 30);
  // A regular file over the bound is refused from its size, unread.
  const fs::path big_dir = FreshDir("big");
  const std::string big = (big_dir / "big.json").string();
  { std::ofstream(big) << std::string(5 << 20, ' '); }
  auto too_big = ReadTextFile(big, int64_t{4} << 20);
  REQUIRE(!too_big.ok());
  CHECK(too_big.status().message() == big + ": larger than 4 MiB, the largest input file read");
  CHECK(ReadTextFile(big, int64_t{5} << 20).ok());
  fs::remove_all(big_dir);

  auto missing = ReadTextFile("/nonexistent-foldplan");
  REQUIRE(!missing.ok());
  CHECK(missing.status().message() == "/nonexistent-foldplan: cannot open: No such file or directory");
}

TEST_CASE("reading a FIFO is refused at once, without waiting for a writer") {
  const fs::path dir = FreshDir("read_fifo");
  const std::string fifo = (dir / "fifo").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const auto start = std::chrono::steady_clock::now();
  auto r = ReadTextFile(fifo);  // blocked in open() forever before
  REQUIRE(!r.ok());
  CHECK(r.status().message() == fifo + ": is a FIFO (a named pipe), not a regular file; an input must be a regular file");
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  fs::remove_all(dir);
}

TEST_CASE("/dev/urandom is refused before any of it is read") {
  auto r = ReadTextFile("/dev/urandom");
  REQUIRE(!r.ok());
  CHECK(r.status().message() == "/dev/urandom: is a character device, not a regular file; an input must be a regular file");
}

TEST_CASE("a stale temporary of the same target left by a dead process is removed by the next write") {
  const fs::path dir = FreshDir("stale");
  const std::string file = (dir / "plan.json").string();
  // A PID that is not running: a child that has exited and been reaped.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  REQUIRE(child > 0);
  REQUIRE(::waitpid(child, nullptr, 0) == child);
  const std::string stale = file + ".tmp." + std::to_string(child);
  const std::string live = file + ".tmp.1";  // init: running, its write is kept
  const std::string other = (dir / "other.json").string() + ".tmp." + std::to_string(child);
  for (const std::string& p : {stale, live, other}) std::ofstream(p) << "half";
  REQUIRE(WriteFileAtomically(file, "new").ok());
  CHECK(!fs::exists(stale));
  CHECK(fs::exists(live));
  CHECK(fs::exists(other));  // another target's temporary is not this write's business
  CHECK(ReadTextFile(file).value() == "new");
  fs::remove_all(dir);
}

TEST_CASE("writing onto an existing file keeps its mode") {
  const fs::path dir = FreshDir("mode");
  const std::string file = (dir / "secret.json").string();
  REQUIRE(WriteFileAtomically(file, "old").ok());
  REQUIRE(::chmod(file.c_str(), 0600) == 0);
  REQUIRE(WriteFileAtomically(file, "new").ok());
  struct stat st {};
  REQUIRE(::stat(file.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
  // As root, the owner is kept too.
  if (::geteuid() == 0) {
    REQUIRE(::chown(file.c_str(), 12345, 12345) == 0);
    REQUIRE(WriteFileAtomically(file, "newer").ok());
    REQUIRE(::stat(file.c_str(), &st) == 0);
    CHECK(st.st_uid == 12345u);
    CHECK(st.st_gid == 12345u);
  }
  fs::remove_all(dir);
}

TEST_CASE("SIGTERM during a write removes the temporary and the writer dies of the signal") {
  const fs::path dir = FreshDir("signal");
  const std::string file = (dir / "big.json").string();
  const pid_t child = ::fork();
  if (child == 0) {
    // Large enough that the write is still going when the signal comes.
    const std::string big(size_t{1} << 28, 'x');
    for (int i = 0; i < 20; ++i) (void)WriteFileAtomically(file, big);
    ::_exit(0);
  }
  REQUIRE(child > 0);
  const std::string tmp = file + ".tmp." + std::to_string(child);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!fs::exists(tmp) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const bool seen = fs::exists(tmp);
  ::kill(child, SIGTERM);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(seen);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGTERM);
  CHECK(!fs::exists(tmp));
  fs::remove_all(dir);
}
