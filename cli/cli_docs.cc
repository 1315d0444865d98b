#include "cli/cli_docs.h"

#include <algorithm>
#include <regex>
#include <set>
#include <sstream>

#include <CLI/CLI.hpp>

namespace foldplan {
namespace {

// The subcommands in their definition order (CLI11 keeps it).
std::vector<const CLI::App*> Subcommands(const CLI::App& app) {
  return app.get_subcommands([](const CLI::App*) { return true; });
}

// The options a user types: named (not positional) and not --help.
std::vector<const CLI::Option*> NamedOptions(const CLI::App& cmd) {
  std::vector<const CLI::Option*> out;
  for (const CLI::Option* opt : cmd.get_options()) {
    if (opt->get_lnames().empty() && opt->get_snames().empty()) continue;
    if (opt->check_lname("help")) continue;
    out.push_back(opt);
  }
  return out;
}

std::vector<std::string> FlagNames(const CLI::Option& opt) {
  std::vector<std::string> names;
  for (const std::string& s : opt.get_snames()) names.push_back("-" + s);
  for (const std::string& l : opt.get_lnames()) names.push_back("--" + l);
  return names;
}

// The argument of an option names a file when its type says so.
bool TakesFile(const CLI::Option& opt) {
  const std::string type = opt.get_type_name();
  return type.find("FILE") != std::string::npos || type.find("PATH") != std::string::npos ||
         type.find("LOG") != std::string::npos;
}

// The choices a help text lists as "a|b|c" at its start or after ": " (how
// every enumerated flag here is described: "rankmap|megatron|..., or a
// launcher file (--hosts): openmpi-rankfile|slurm|..."), or none.
std::vector<std::string> ListedChoices(const CLI::Option& opt) {
  static const std::regex kChoices("(^|: )([a-z0-9][a-z0-9_-]*(\\|[a-z0-9][a-z0-9_-]*)+)");
  const std::string description = opt.get_description();
  std::vector<std::string> out;
  for (std::sregex_iterator it(description.begin(), description.end(), kChoices), end; it != end; ++it) {
    std::stringstream words((*it)[2].str());
    for (std::string w; std::getline(words, w, '|');) out.push_back(w);
  }
  return out;
}

// groff: a backslash is \e, a line may not start with '.' or '\'', and a
// hyphen in a flag is \- (so it is not hyphenated or turned into a dash).
std::string Roff(const std::string& text) {
  std::string out;
  bool line_start = true;
  for (char c : text) {
    if (line_start && (c == '.' || c == '\'')) out += "\\&";
    if (c == '\\')
      out += "\\e";
    else if (c == '-')
      out += "\\-";
    else
      out += c;
    line_start = c == '\n';
  }
  return out;
}

// What an option shows after its names: the argument's type, then the default.
std::string OptionHead(const CLI::Option& opt) {
  std::string head;
  const std::vector<std::string> names = FlagNames(opt);
  for (std::size_t i = 0; i < names.size(); ++i) head += (i ? ", " : "") + ("\\fB" + Roff(names[i]) + "\\fR");
  if (opt.get_type_size() != 0 && !opt.get_type_name().empty()) head += " \\fI" + Roff(opt.get_type_name()) + "\\fR";
  return head;
}

// --help with one option per line: its names, argument type and default
// in the first column; its description, wrapped, from column 30, on the
// next line when the first column leaves no room; then what it needs and
// excludes, each on a line of its own (CLI11's own formatter runs those
// into the first column, up against the description).
class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_help(const CLI::App* app, std::string name, CLI::AppFormatMode mode) const override {
    app_ = app;  // whose options make_option names
    return CLI::Formatter::make_help(app, std::move(name), mode);
  }

  std::string make_option_opts(const CLI::Option* opt) const override {
    std::string out;
    if (opt->get_type_size() != 0) {
      if (!opt->get_type_name().empty()) out += " " + opt->get_type_name();
      if (!opt->get_default_str().empty()) out += "=" + opt->get_default_str();
      if (opt->get_expected_max() == CLI::detail::expected_max_vector_size) out += " ...";
      if (opt->get_required()) out += " REQUIRED";
    }
    return out;
  }

  std::string make_option(const CLI::Option* opt, bool is_positional) const override {
    const size_t column = get_column_width();
    std::vector<std::string> lines = Wrap(make_option_desc(opt), kWidth - column);
    // The names in the order of the definition (a set of pointers has none).
    auto names = [&](const std::set<CLI::Option*>& options) {
      std::string out;
      if (!app_) return out;
      for (const CLI::Option* o : app_->get_options()) {
        if (options.count(const_cast<CLI::Option*>(o))) out += (out.empty() ? "" : ", ") + o->get_name();
      }
      return out;
    };
    if (!opt->get_needs().empty()) lines.push_back("needs " + names(opt->get_needs()));
    if (!opt->get_excludes().empty()) lines.push_back("not with " + names(opt->get_excludes()));
    return Columns("  " + make_option_name(opt, is_positional) + make_option_opts(opt), lines);
  }

  // `foldplan --help`'s list of commands, their descriptions wrapped alike.
  std::string make_subcommand(const CLI::App* sub) const override {
    return Columns("  " + sub->get_name(), Wrap(sub->get_description(), kWidth - get_column_width()));
  }

 private:
  mutable const CLI::App* app_ = nullptr;
  static constexpr size_t kWidth = 110;  // the help's lines at most (a longer word alone)

  // `head`, then `lines` from the description column: beside it when two
  // spaces at least are left, else from the next line.
  std::string Columns(std::string head, const std::vector<std::string>& lines) const {
    const size_t column = get_column_width();
    if (lines.empty()) return head + "\n";
    head += head.size() + 2 <= column ? std::string(column - head.size(), ' ') : "\n" + std::string(column, ' ');
    for (size_t i = 0; i < lines.size(); ++i) head += (i ? std::string(column, ' ') : "") + lines[i] + "\n";
    return head;
  }

  static std::vector<std::string> Wrap(const std::string& text, size_t width) {
    std::vector<std::string> lines;
    std::string line;
    std::istringstream words(text);
    for (std::string word; words >> word;) {
      if (!line.empty() && line.size() + 1 + word.size() > width) {
        lines.push_back(line);
        line.clear();
      }
      line += (line.empty() ? "" : " ") + word;
    }
    if (!line.empty()) lines.push_back(line);
    return lines;
  }
};

const char* const kExitStatus =
    "0 a positive answer; 1 an invalid input file or a negative answer (no legal layout, a layout "
    "illegal or out of memory); 2 a command-line usage error. validate returns foldbench's status.";

}  // namespace

const std::vector<CliExample>& CliExamples() {
  static const std::vector<CliExample> kExamples = {
      {"list", "foldplan list"},
      {"check", "foldplan check data/models/mixtral-8x7b.json data/clusters/h100-dgx-16n.json"},
      {"topo", "foldplan topo --cluster gb200-nvl72-4r"},
      {"enumerate", "foldplan enumerate --model mixtral-8x7b --fix tp=2 --limit 10"},
      {"plan", "foldplan plan --model mixtral-8x7b --top 5 -o plan.json"},
      {"explain", "foldplan explain --plan plan.json --candidate 1"},
      {"diff", "foldplan diff --plan plan.json --candidates 1,2"},
      {"simulate", "foldplan simulate --plan plan.json --trace trace.json"},
      {"ranks", "foldplan ranks --world-size 16 --layout tp=2,cp=1,pp=2,ep=4,etp=1 --format megatron"},
      {"validate", "foldplan validate --plan plan.json --dry-run"},
      {"calibrate", "foldplan calibrate --nccl-tests all_reduce:all_reduce.log -o calibration.json", false},
      {"collective", "foldplan collective --op all_to_all --ranks 16 --bytes 1M:256M"},
      {"compare", "foldplan compare --plan plan.json --measurements measurements.json", false},
      {"report", "foldplan report --plan plan.json -o report.html"},
      {"man", "foldplan man > foldplan.1"},
      {"completion", "foldplan completion > foldplan.bash"},
  };
  return kExamples;
}

void FinishCliDefinition(CLI::App& app) {
  const auto formatter = std::make_shared<HelpFormatter>();
  app.formatter(formatter);
  for (CLI::App* cmd : app.get_subcommands([](CLI::App*) { return true; })) {
    cmd->formatter(formatter);
    for (CLI::Option* opt : cmd->get_options()) {
      // An output option's argument is a file (for completion and the man page).
      if (opt->check_lname("output") && opt->get_type_name() == "TEXT") opt->type_name("FILE");
      // A flag's bound bool would show "0", a required option's placeholder
      // and an empty list nothing useful: only real defaults are shown.
      if (opt->get_type_size() == 0 || opt->get_required() || !opt->get_default_str().empty()) continue;
      opt->capture_default_str();
      if (opt->get_default_str() == "[]") opt->default_str("");
    }
    for (const CliExample& example : CliExamples())
      if (example.subcommand == cmd->get_name()) {
        const std::string footer = cmd->get_footer();
        cmd->footer((footer.empty() ? "" : footer + "\n\n") + "Example:\n  " + example.command);
      }
  }
}

void WriteManPage(const CLI::App& app, std::ostream& out) {
  out << ".\\\" Generated by `foldplan man` from the command-line definition; do not edit.\n";
  out << ".TH FOLDPLAN 1 \"\" \"" << Roff(kVersionText) << "\" \"User Commands\"\n";
  out << ".SH NAME\nfoldplan \\- " << Roff(app.get_description().substr(app.get_description().find(": ") + 2))
      << "\n";
  out << ".SH SYNOPSIS\n.B foldplan\n\\fICOMMAND\\fR [\\fIOPTIONS\\fR]\n";
  out << ".SH DESCRIPTION\nEach command reads the cluster, model and job as shipped names or JSON "
         "files (\\fBfoldplan list\\fR names the shipped ones) and prints text, or JSON with "
         "\\fB\\-\\-json\\fR. \\fBfoldplan COMMAND \\-\\-help\\fR shows a command's options.\n";
  out << ".SH COMMANDS\n";
  for (const CLI::App* cmd : Subcommands(app)) {
    out << ".SS \"foldplan " << Roff(cmd->get_name()) << "\"\n" << Roff(cmd->get_description()) << "\n";
    for (const CLI::Option* opt : cmd->get_options()) {
      if (!opt->get_lnames().empty() || !opt->get_snames().empty()) continue;
      if (opt->get_name().empty()) continue;
      out << ".TP\n\\fI" << Roff(opt->get_name()) << "\\fR\n" << Roff(opt->get_description()) << "\n";
    }
    for (const CLI::Option* opt : NamedOptions(*cmd)) {
      out << ".TP\n" << OptionHead(*opt) << "\n" << Roff(opt->get_description());
      if (!opt->get_default_str().empty()) out << " (default: " << Roff(opt->get_default_str()) << ")";
      out << "\n";
    }
    std::string footer = cmd->get_footer();
    if (!footer.empty()) {
      out << ".PP\n.nf\n" << Roff(footer) << "\n.fi\n";
    }
  }
  out << ".SH EXIT STATUS\n" << Roff(kExitStatus) << "\n";
  out << ".SH ENVIRONMENT\n.TP\n\\fBFOLDPLAN_DATA_DIR\\fR\nthe folder of shipped inputs (default: the source "
         "tree's data/ when the binary was built there, else the installed share/foldplan/data).\n.TP\n\\fBFOLDBENCH\\fR\nthe foldbench "
         "\\fBvalidate\\fR runs (default: the one next to foldplan).\n";
  out << ".SH SEE ALSO\n\\fBmpirun\\fR(1); the README and doc/ of the foldplan sources.\n";
}

void WriteBashCompletion(const CLI::App& app, std::ostream& out) {
  out << "# bash completion for foldplan. Generated by `foldplan completion` from the\n"
         "# command-line definition; do not edit. Install as\n"
         "# share/bash-completion/completions/foldplan, or `source` it.\n";
  out << "_foldplan() {\n"
         "  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} cmd= i\n"
         "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
         "    case ${COMP_WORDS[i]} in -*) ;; *) cmd=${COMP_WORDS[i]}; break ;; esac\n"
         "  done\n"
         "  if [[ -z $cmd ]]; then\n"
         "    COMPREPLY=($(compgen -W \"";
  std::string names;
  for (const CLI::App* cmd : Subcommands(app)) names += (names.empty() ? "" : " ") + cmd->get_name();
  out << names << " --help --version\" -- \"$cur\"))\n    return\n  fi\n";
  out << "  local opts= files= choices=\n  case $cmd in\n";
  for (const CLI::App* cmd : Subcommands(app)) {
    std::string opts, files;
    std::vector<std::pair<std::string, std::string>> choices;
    for (const CLI::Option* opt : NamedOptions(*cmd)) {
      for (const std::string& n : FlagNames(*opt)) {
        opts += (opts.empty() ? "" : " ") + n;
        if (TakesFile(*opt)) files += (files.empty() ? "" : "|") + n;
        const std::vector<std::string> listed = ListedChoices(*opt);
        if (!listed.empty()) {
          std::string words;
          for (const std::string& w : listed) words += (words.empty() ? "" : " ") + w;
          choices.emplace_back(n, words);
        }
      }
    }
    out << "    " << cmd->get_name() << ")\n      opts=\"" << opts << " --help\"\n";
    out << "      case $prev in\n";
    if (!files.empty()) out << "        " << files << ") files=1 ;;\n";
    for (const auto& c : choices) out << "        " << c.first << ") choices=\"" << c.second << "\" ;;\n";
    out << "      esac\n      ;;\n";
  }
  out << "  esac\n"
         "  if [[ -n $choices ]]; then COMPREPLY=($(compgen -W \"$choices\" -- \"$cur\")); return; fi\n"
         "  if [[ -n $files || $cur != -* ]]; then COMPREPLY=($(compgen -f -- \"$cur\")); return; fi\n"
         "  COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n"
         "}\n"
         "complete -o filenames -F _foldplan foldplan\n";
}

}  // namespace foldplan
