#include "cli/output.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/atomic_file.h"
#include "core/quoted_text.h"

namespace foldplan {

int Fail(std::ostream& err, const Status& status) {
  // Messages quote input (file contents, flag values): no control byte of it
  // reaches the terminal raw.
  err << "foldplan: " << EscapeControlBytes(status.message()) << "\n";
  return 1;
}

int Usage(std::ostream& err, const Status& status) {
  Fail(err, status);
  return 2;
}

Status WriteOrPrint(const std::string& text, const std::string& path, std::ostream& out,
                    std::ostream& err) {
  if (path.empty()) {
    out << text;
    return Status();
  }
  Status s = WriteFileAtomically(path, text);
  if (s.ok()) err << "wrote " << path << "\n";
  return s;
}

size_t OutputColumns() {
  constexpr size_t kDefaultColumns = 120;  // a pipe or a file: what a wide terminal shows
  if (const char* env = std::getenv("COLUMNS"); env && *env) {
    const std::string text = env;
    if (text.size() <= 5 && text.find_first_not_of("0123456789") == std::string::npos) {
      const int n = std::stoi(text);
      if (n >= 20 && n <= 10000) return static_cast<size_t>(n);
    }
  }
  winsize size{};
  if (::isatty(STDOUT_FILENO) && ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col >= 20) {
    return size.ws_col;
  }
  return kDefaultColumns;
}

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace foldplan
