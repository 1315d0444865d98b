#include "core/nearest_name.h"

#include <algorithm>
#include <cctype>

namespace foldplan {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Edit distance with swaps of neighbours (the optimal string alignment
// distance): "plna" is 1 from "plan".
size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::optional<std::string> NearestName(std::string_view typed, const std::vector<std::string>& names) {
  const std::string t = Lower(typed);
  if (t.empty()) return std::nullopt;
  std::optional<std::string> best;
  size_t best_distance = 0;
  for (const std::string& name : names) {
    const size_t d = EditDistance(t, Lower(name));
    const size_t allowed = std::max<size_t>(1, std::max(t.size(), name.size()) / 3);
    if (d <= allowed && (!best || d < best_distance)) {
      best = name;
      best_distance = d;
    }
  }
  if (best) return best;
  // A prefix of exactly one name.
  const std::string bare = t.substr(t.find_first_not_of('-') == std::string::npos ? 0 : t.find_first_not_of('-'));
  if (bare.size() < 2) return std::nullopt;
  std::optional<std::string> only;
  for (const std::string& name : names) {
    if (Lower(name).rfind(t, 0) == 0) {
      if (only && *only != name) return std::nullopt;
      only = name;
    }
  }
  return only;
}

std::string DidYouMean(std::string_view typed, const std::vector<std::string>& names) {
  const std::optional<std::string> near = NearestName(typed, names);
  return near ? "; did you mean \"" + *near + "\"?" : "";
}

std::vector<std::string> ChoiceNames(std::string_view text) {
  std::vector<std::string> out;
  std::string word;
  auto flush = [&] {
    if (!word.empty() && word != "or" && word != "alias" && word != "one" && word != "of" &&
        std::find(out.begin(), out.end(), word) == out.end()) {
      out.push_back(word);
    }
    word.clear();
  };
  for (char c : text) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '+') {
      word += c;
    } else {
      flush();
    }
  }
  flush();
  return out;
}

}  // namespace foldplan
