#include "cli/output.h"

#include <cstdio>

#include "core/atomic_file.h"

namespace foldplan {

int Fail(std::ostream& err, const Status& status) {
  err << "foldplan: " << status.message() << "\n";
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

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace foldplan
