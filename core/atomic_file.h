// Reading input files with a bound, and writing output files so that a
// reader never sees a half-written one.
//
// WriteFileAtomically: the text goes to a temporary file beside the target,
// is fsync'ed, renamed over the target, and the directory is fsync'ed, so a
// crash at any point leaves either the old file or the new one. On any
// failure the target is left as it was. A symbolic link is followed (the
// file it names is replaced, not the link). Targets that are not regular
// files are never replaced: a character device or FIFO (`-o /dev/stdout`,
// a pipe) is written in place, a directory or block device is refused.
// A replaced file keeps its mode (and its owner when run as root). The
// temporary is FILE.tmp.PID: SIGINT and SIGTERM during the write remove it
// before the program dies of them, and one a killed process left behind
// (its PID no longer running) is removed by the next write of FILE.
//
// ReadTextFile, the one reader of every input file: a regular file only
// (a FIFO, device, socket or directory is refused before anything is read:
// `check FIFO` does not wait for a writer, `--cluster /dev/zero` reads
// nothing), refused past kMaxInputFileBytes.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace foldplan {

// The largest input file read: 1 GiB. The rank map of the largest world
// (core/formats.h) is about 215 MB; a JSON file of 1 GiB already takes
// several gigabytes once parsed.
inline constexpr int64_t kMaxInputFileBytes = int64_t{1} << 30;

Status WriteFileAtomically(const std::string& path, const std::string& contents);

// Whole file as text, refused past `max_bytes`; errors name the path.
Result<std::string> ReadTextFile(const std::string& path, int64_t max_bytes = kMaxInputFileBytes);

}  // namespace foldplan
