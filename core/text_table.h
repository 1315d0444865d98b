// Plain-text tables for terminal output: columns sized to their widest
// cell, numbers right-aligned, text left-aligned.
#pragma once

#include <string>
#include <vector>

namespace foldplan {

class TextTable {
 public:
  enum class Align { kLeft, kRight };
  explicit TextTable(std::vector<std::string> headers, std::vector<Align> aligns = {});
  void AddRow(std::vector<std::string> cells);
  // Rendered with two spaces between columns and a rule under the header.
  std::string Render(const std::string& indent = "") const;

 private:
  std::vector<std::string> headers_;
  std::vector<Align> aligns_;
  std::vector<std::vector<std::string>> rows_;
};

// 1234567 -> "1,234,567".
std::string WithCommas(unsigned long long n);

}  // namespace foldplan
