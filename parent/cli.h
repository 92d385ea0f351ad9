// Command-line parsing for `forkbox` (CLI11). Never exits the process itself.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "parent/options.h"

namespace CLI {
class App;
class ParseError;
class Validator;
}  // namespace CLI

namespace forkbox::parent {

struct CliOutcome {
  std::optional<Options> options;  // Set when the program should run.
  int exit_code = 0;  // Otherwise: exit with this (0 for --help/--version, 2 on error).
  std::string out;    // Text for stdout (help, version).
  std::string err;    // Text for stderr (the usage error).
  // What the command line asked for, also when parsing failed: json and stream-json modes report
  // a usage error as a JSON object on stdout too.
  OutputFormat format = OutputFormat::kText;
  // kConfig: every long option's effective value and where it came from ("flag", "environment
  // (VAR)", "user config PATH:LINE", "project config PATH:LINE", "default").
  std::vector<std::pair<std::string, std::string>> effective;
};

enum class CliCommand {
  kRun,     // forkbox [FLAGS] [PROMPT]
  kConfig,  // forkbox config [FLAGS]: no PROMPT; fills `effective`.
  kAgents,  // forkbox agents [FLAGS]: no PROMPT; the options a session with them would get.
};

// The flags, then the config files (parent/config_file.h) under them: flags > environment >
// project > user. A file's value for an option the command line sets, or for one it excludes
// (quiet = true under -v), is dropped; two such flags are a usage error. A file's bad value is an
// error naming the file, the line and the key, in the output format the flags and files ask for.
// The environment's settings (provider, model, base-url, child-path) are left unresolved: the
// files' values go to Options::provider_files and child_path_file, below the environment.
CliOutcome ParseCommandLine(int argc, char** argv, CliCommand command = CliCommand::kRun);

// Refuses an empty value with `why` (default "the value is empty"). An empty --model "$UNSET" must
// not quietly mean the default: every option that names a path, a provider, a model or a session
// takes it.
CLI::Validator NonEmpty(std::string why = "");

// The first `--name=` with nothing after the `=` (`--model=$UNSET`) in argv[1..argc), before any
// `--`; nullopt when none. A usage error ("--model: the value is empty") before CLI11 parses:
// CLI11 would take the next argument as the value, the prompt as the model.
std::optional<std::string> EmptyInlineValue(int argc, char** argv);

// A subcommand's (`forkbox sessions`, `forkbox agents`) parse error or --help: the help on stdout
// (returns 0), or "<app name>: " and the error on stderr (returns 2).
int SubcommandParseExit(CLI::App& app, const CLI::ParseError& error);

}  // namespace forkbox::parent
