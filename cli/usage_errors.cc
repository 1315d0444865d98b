#include "cli/usage_errors.h"

#include <algorithm>
#include <cctype>

#include <CLI/CLI.hpp>

#include "core/decimal_text.h"
#include "core/quoted_text.h"

namespace foldplan {
namespace {

// What an option's values are, from its type name (CLI11's INT, UINT,
// FLOAT for the variables' types, or the names given here: N and K counts,
// X a number); anything else is text.
enum class ValueKind { kInteger, kUnsigned, kNumber, kText };
ValueKind KindOf(const std::string& type) {
  if (type == "INT" || type == "N" || type == "K") return ValueKind::kInteger;
  if (type == "UINT") return ValueKind::kUnsigned;
  if (type == "FLOAT" || type == "X") return ValueKind::kNumber;
  return ValueKind::kText;
}

// Every name of an option as typed: "-o", "--output".
std::vector<std::string> OptionNames(const CLI::Option& opt) {
  std::vector<std::string> names;
  for (const std::string& s : opt.get_snames()) names.push_back("-" + s);
  for (const std::string& l : opt.get_lnames()) names.push_back("--" + l);
  return names;
}

std::vector<std::string> FlagsOf(const CLI::App& cmd) {
  std::vector<std::string> names;
  for (const CLI::Option* opt : cmd.get_options()) {
    for (const std::string& n : OptionNames(*opt)) names.push_back(n);
  }
  return names;
}

std::vector<std::string> CommandNames(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) names.push_back(sub->get_name());
  return names;
}

std::string Joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// The option of `cmd` named `name` ("--top", "-o"), or none.
const CLI::Option* OptionNamed(const CLI::App& cmd, const std::string& name) {
  for (const CLI::Option* opt : cmd.get_options()) {
    const std::vector<std::string> names = OptionNames(*opt);
    if (std::find(names.begin(), names.end(), name) != names.end()) return opt;
  }
  return nullptr;
}

// What a value of this option must be, from its type's name (CLI11's INT,
// UINT, FLOAT, or the names given here: N and K counts, X a number).
std::string ExpectedValue(const CLI::Option* opt) {
  const std::string type = opt ? opt->get_type_name() : "";
  switch (KindOf(type)) {
    case ValueKind::kInteger: return "an integer";
    case ValueKind::kUnsigned: return "a non-negative integer";
    case ValueKind::kNumber: return "a number";
    case ValueKind::kText: break;
  }
  return type.empty() ? "another value" : "a value of type " + type;
}

// The validator of one kind of value: it refuses what the rule refuses and
// rewrites an integer in canonical decimal ("007" -> "7"), since CLI11's own
// conversion would read a leading 0 as octal.
CLI::Validator ValueRule(ValueKind kind) {
  return CLI::Validator(
      [kind](std::string& value) -> std::string {
        if (value.empty()) return "expected a value, found an empty one";
        const bool digits = value.find_first_not_of("0123456789") == std::string::npos ||
                            (value[0] == '-' && value.size() > 1 &&
                             value.find_first_not_of("0123456789", 1) == std::string::npos);
        const std::string found = ", found " + Quoted(value);
        switch (kind) {
          case ValueKind::kInteger:
            if (const auto v = ParseDecimalInteger(value)) {
              value = std::to_string(*v);
              return "";
            }
            return "expected an integer" + found + (digits ? " (too large)" : " (decimal digits only)");
          case ValueKind::kUnsigned:
            if (const auto v = ParseDecimalUnsigned(value)) {
              value = std::to_string(*v);
              return "";
            }
            return "expected a non-negative integer" + found +
                   (digits && value[0] != '-' ? " (too large: at most 18446744073709551615)" : " (decimal digits only)");
          case ValueKind::kNumber:
            if (ParseDecimalNumber(value)) return "";
            return "expected a number" + found + " (a finite decimal number such as 0.5 or 1e-3)";
          case ValueKind::kText:
            return "";
        }
        return "";
      },
      "", "foldplan-value");
}

// The arguments after the command word (argv[first..]), up to "--".
std::vector<std::string> ArgsFrom(int argc, const char* const* argv, int first) {
  std::vector<std::string> args;
  for (int i = first; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--") break;
    args.emplace_back(argv[i]);
  }
  return args;
}

// An argument that names an option: "-o", "--top", "--top=3" (not "-1", a value).
bool LooksLikeFlag(const std::string& arg) {
  return arg.size() > 1 && arg[0] == '-' && !std::isdigit(static_cast<unsigned char>(arg[1])) && arg[1] != '.';
}

std::string FlagName(const std::string& arg) { return arg.substr(0, arg.find('=')); }

// The first argument of `args` that is not one of `cmd`'s flags, or, when
// every flag is known, the first word no flag takes as its value.
std::string ExtrasText(const CLI::App& cmd, const std::vector<std::string>& args, const std::string& where) {
  for (const std::string& arg : args) {
    if (!LooksLikeFlag(arg)) continue;
    const std::string name = FlagName(arg);
    if (OptionNamed(cmd, name)) continue;
    return where + "unknown option " + name + DidYouMean(name, FlagsOf(cmd)) + " (`foldplan " +
           (cmd.get_parent() ? cmd.get_name() + " " : std::string()) + "--help` lists the options)";
  }
  // Every flag is known: the extra is a word no flag took as its value.
  size_t values_left = 0;
  bool many = false;
  for (const std::string& arg : args) {
    if (LooksLikeFlag(arg)) {
      const CLI::Option* opt = OptionNamed(cmd, FlagName(arg));
      const bool inline_value = arg.find('=') != std::string::npos;
      // A flag expects no value (CLI11: expected_max 0), a list many.
      many = opt && opt->get_expected_max() > 1;
      values_left = opt && opt->get_expected_max() > 0 && !inline_value ? 1 : 0;
      continue;
    }
    if (values_left > 0 || many) {
      values_left = values_left > 0 ? values_left - 1 : 0;
      continue;
    }
    bool positional = false;
    for (const CLI::Option* opt : cmd.get_options()) positional |= opt->get_lnames().empty() && opt->get_snames().empty() && !opt->get_name().empty();
    if (positional) continue;
    return where + "unexpected argument \"" + arg + "\": values go after their flags (`foldplan " +
           (cmd.get_parent() ? cmd.get_name() + " " : std::string()) + "--help` lists them)";
  }
  return where + "unexpected arguments: " + Joined(args);
}

// Whether `e` is a T (its class: get_name() is the subcommand's name for some).
template <class T>
bool Is(const CLI::ParseError& e) {
  return dynamic_cast<const T*>(&e) != nullptr;
}

}  // namespace

void ApplyValueRules(CLI::App& app) {
  for (CLI::App* cmd : app.get_subcommands([](CLI::App*) { return true; })) {
    for (CLI::Option* opt : cmd->get_options()) {
      if (opt->get_type_size() == 0) continue;  // a flag: no value
      opt->transform(ValueRule(KindOf(opt->get_type_name())));
    }
  }
}

namespace {

std::string UnescapedParseErrorText(const CLI::App& app, const CLI::ParseError& e, int argc,
                                   const char* const* argv) {
  const std::vector<std::string> commands = CommandNames(app);
  // The command word: the first argument that is not a flag (the program's
  // own flags take no value).
  int word = 0;
  for (int i = 1; i < argc && !word; ++i) {
    if (!LooksLikeFlag(argv[i])) word = i;
  }
  if (!word) {
    const std::vector<std::string> top = ArgsFrom(argc, argv, 1);
    for (const std::string& arg : top) {
      if (!OptionNamed(app, FlagName(arg))) {
        const std::string near = DidYouMean(FlagName(arg), FlagsOf(app));
        if (!near.empty()) return "unknown option " + FlagName(arg) + near;
        return "unknown option " + FlagName(arg) + ": a command comes first: " + Joined(commands) +
               " (`foldplan --help` says what each does)";
      }
    }
    return "a command is required: " + Joined(commands) + " (`foldplan --help` says what each does)";
  }
  const std::string typed = argv[word];
  const CLI::App* cmd = nullptr;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->get_name() == typed) cmd = sub;
  }
  if (!cmd) {
    return "unknown command \"" + typed + "\"" + DidYouMean(typed, commands) + " (the commands: " + Joined(commands) +
           ")";
  }
  const std::string where = typed + ": ";
  const std::string what = e.what();
  const std::vector<std::string> args = ArgsFrom(argc, argv, word + 1);
  if (Is<CLI::ExtrasError>(e)) return ExtrasText(*cmd, args, where);
  if (Is<CLI::ConversionError>(e) && what.rfind("Could not convert: ", 0) == 0) {
    const std::string rest = what.substr(std::string("Could not convert: ").size());
    const size_t eq = rest.find(" = ");
    const std::string flag = rest.substr(0, eq), value = eq == std::string::npos ? "" : rest.substr(eq + 3);
    const CLI::Option* opt = OptionNamed(*cmd, flag);
    std::string text = where + flag + ": expected " + ExpectedValue(opt) + ", found \"" + value + "\"";
    const bool digits = !value.empty() && value.find_first_not_of("0123456789") == std::string::npos;
    if (digits) text += " (too large)";
    return text;
  }
  if (Is<CLI::ValidationError>(e)) {
    // CLI::IsMember: "--backend: mpii not in {mpi,nccl}".
    const size_t colon = what.find(": "), in = what.find(" not in {");
    if (colon != std::string::npos && in != std::string::npos && in > colon) {
      const std::string flag = what.substr(0, colon), value = what.substr(colon + 2, in - colon - 2);
      const std::vector<std::string> choices = ChoiceNames(what.substr(in + 9));
      std::string list;
      for (size_t i = 0; i < choices.size(); ++i) {
        list += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
      }
      return where + flag + ": expected " + list + ", found \"" + value + "\"" + DidYouMean(value, choices);
    }
  }
  if (Is<CLI::ArgumentMismatch>(e)) {
    // "--top: 1 required INT missing", "--gpus: At Most 1 required but received 2".
    const std::string flag = what.substr(0, what.find(':'));
    const CLI::Option* opt = OptionNamed(*cmd, flag);
    if (what.find(" missing") != std::string::npos) {
      return where + flag + " needs a value" + (opt && !opt->get_type_name().empty() ? " (" + opt->get_type_name() + ")" : "");
    }
    if (what.find("At Most") != std::string::npos) return where + flag + " given more than once: give it once";
  }
  if (Is<CLI::RequiresError>(e)) {
    const size_t at = what.find(" requires ");
    if (at != std::string::npos) return where + what.substr(0, at) + " needs " + what.substr(at + 10);
  }
  if (Is<CLI::ExcludesError>(e)) {
    const size_t at = what.find(" excludes ");
    if (at != std::string::npos) {
      return where + what.substr(0, at) + " and " + what.substr(at + 10) + " exclude each other: give one of them";
    }
  }
  if (Is<CLI::RequiredError>(e)) {
    const size_t at = what.find(" is required");
    if (at != std::string::npos) {
      const std::string flag = what.substr(0, at);
      const CLI::Option* opt = cmd->get_option_no_throw(flag);
      const bool positional = opt && opt->get_lnames().empty() && opt->get_snames().empty();
      const std::string type = opt && !opt->get_type_name().empty() ? " " + opt->get_type_name() : "";
      return where + (positional ? "expected one or more " + flag : flag + type + " is required") + " (`foldplan " +
             typed + " --help` says what it is)";
    }
  }
  return where + what;
}

}  // namespace

// The arguments are quoted raw above; their control bytes are escaped here,
// once, for the whole message.
std::string ParseErrorText(const CLI::App& app, const CLI::ParseError& e, int argc, const char* const* argv) {
  return EscapeControlBytes(UnescapedParseErrorText(app, e, argc, argv));
}

}  // namespace foldplan
