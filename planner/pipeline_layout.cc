#include "planner/pipeline_layout.h"

#include <numeric>

namespace foldplan {
namespace {

// Bounds the expansion: no real layout comes near (4096 layers, 1024 stages),
// and "t*999999999" must not allocate gigabytes.
constexpr size_t kMaxExpanded = size_t{1} << 20;

// Recursive descent over the grammar, expanding into a flat string of
// E, t, m, L and '|'.
class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Result<std::string> Run() {
    std::string out;
    if (Status s = Sequence(&out, /*depth=*/0); !s.ok()) return s;
    if (pos_ < text_.size()) return Error("')' without '('");
    if (out.empty()) return Status::Error("pp_layout is empty");
    return out;
  }

 private:
  Status Error(const std::string& what) const {
    return Status::Error("column " + std::to_string(pos_ + 1) + ": " + what);
  }
  void SkipSpaces() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t')) ++pos_;
  }

  Status Sequence(std::string* out, int depth) {
    for (;;) {
      SkipSpaces();
      if (pos_ >= text_.size() || text_[pos_] == ')') return Status();
      std::string atom;
      const char c = text_[pos_];
      if (c == 'E' || c == 't' || c == 'm' || c == 'L' || c == '|') {
        atom = std::string(1, c);
        ++pos_;
      } else if (c == '(') {
        if (depth >= 16) return Error("parentheses nested deeper than 16");
        const size_t open = pos_++;
        if (Status s = Sequence(&atom, depth + 1); !s.ok()) return s;
        if (pos_ >= text_.size()) {
          pos_ = open;
          return Error("'(' without ')'");
        }
        ++pos_;  // ')'
        if (atom.empty()) {
          pos_ = open;
          return Error("empty parentheses");
        }
      } else {
        return Error(std::string("unexpected '") + c + "'; expected E, t, m, L, '|', '(' or ')'");
      }
      size_t repeat = 1;
      SkipSpaces();
      if (pos_ < text_.size() && text_[pos_] == '*') {
        ++pos_;
        SkipSpaces();
        const size_t digits = pos_;
        size_t n = 0;
        while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
          n = n * 10 + static_cast<size_t>(text_[pos_] - '0');
          ++pos_;
          if (n > kMaxExpanded) return Error("repeat count too large");
        }
        if (pos_ == digits) return Error("'*' needs a repeat count");
        if (n == 0) {
          pos_ = digits;
          return Error("repeat count 0; expected at least 1");
        }
        repeat = n;
      }
      if (out->size() + atom.size() * repeat > kMaxExpanded) return Error("layout expands past 1,048,576 symbols");
      for (size_t i = 0; i < repeat; ++i) *out += atom;
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
};

std::string Stage(int decoder, int mtp) {
  std::string out;
  if (decoder <= 2) out.append(static_cast<size_t>(decoder), 't');
  else out += "t*" + std::to_string(decoder);
  if (mtp == 1) out += "m";
  else if (mtp > 1) out += "m*" + std::to_string(mtp);
  return out;
}

}  // namespace

int PipelineLayout::decoder_layers() const { return std::accumulate(decoder.begin(), decoder.end(), 0); }
int PipelineLayout::mtp_layers() const { return std::accumulate(mtp.begin(), mtp.end(), 0); }

Result<PipelineLayout> ParsePipelineLayout(std::string_view text) {
  Result<std::string> flat = Parser(text).Run();
  if (!flat.ok()) return flat.status();
  PipelineLayout out;
  out.decoder.push_back(0);
  out.mtp.push_back(0);
  int embeddings = 0, losses = 0;
  bool saw_mtp = false;
  const std::string& s = *flat;
  for (size_t i = 0; i < s.size(); ++i) {
    // Where s[i] is, for the errors only.
    auto where = [&] { return "stage " + std::to_string(out.stages() - 1); };
    switch (s[i]) {
      case '|':
        out.decoder.push_back(0);
        out.mtp.push_back(0);
        break;
      case 'E':
        if (++embeddings > 1) return Status::Error("E appears twice; the embedding is on the first stage only");
        if (i != 0) return Status::Error("E must open the first stage (found on " + where() + ")");
        break;
      case 'L':
        if (++losses > 1) return Status::Error("L appears twice; the loss is on the last stage only");
        if (i + 1 != s.size()) return Status::Error("L must close the last stage (found on " + where() + ")");
        break;
      case 't':
        if (saw_mtp) return Status::Error("t after m on " + where() + "; MTP layers follow every decoder layer");
        ++out.decoder.back();
        break;
      case 'm':
        saw_mtp = true;
        ++out.mtp.back();
        break;
    }
  }
  if (embeddings == 0) return Status::Error("no E; the first stage must open with the embedding");
  if (losses == 0) return Status::Error("no L; the last stage must close with the loss");
  return out;
}

std::string FormatPipelineLayout(const std::vector<int>& decoder, const std::vector<int>& mtp) {
  const size_t n = decoder.size();
  auto m = [&](size_t i) { return i < mtp.size() ? mtp[i] : 0; };
  if (n == 0) return "EL";
  if (n == 1) return "E" + Stage(decoder[0], m(0)) + "L";
  std::string out = "E" + Stage(decoder[0], m(0)) + "|";
  // Middle stages 1 .. n-2, runs of equal stages grouped.
  for (size_t i = 1; i + 1 < n;) {
    size_t j = i;
    const std::string stage = Stage(decoder[i], m(i));
    while (j + 1 < n - 1 && Stage(decoder[j + 1], m(j + 1)) == stage) ++j;
    const size_t run = j - i + 1;
    if (run == 1) out += stage + "|";
    else out += "(" + stage + "|)*" + std::to_string(run);
    i = j + 1;
  }
  return out + Stage(decoder[n - 1], m(n - 1)) + "L";
}

}  // namespace foldplan
