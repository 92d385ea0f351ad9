// Command-line parsing for `forkbox` (CLI11). Never exits the process itself.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "parent/options.h"

namespace forkbox::parent {

struct CliOutcome {
  std::optional<Options> options;  // Set when the program should run.
  int exit_code = 0;  // Otherwise: exit with this (0 for --help/--version, 2 on error).
  std::string out;    // Text for stdout (help, version).
  std::string err;    // Text for stderr (the usage error).
  // What the command line asked for, also when parsing failed: json and stream-json modes report
  // a usage error as a JSON object on stdout too.
  OutputFormat format = OutputFormat::kText;
  // Every long option's effective value and where it came from ("flag", "environment (VAR)",
  // "user config PATH:LINE", "project config PATH:LINE", "default"): `forkbox config`.
  std::vector<std::pair<std::string, std::string>> effective;
};

// Flags over the config files (parent/config_file.h), whose values go in front of argv's.
CliOutcome ParseCommandLine(int argc, char** argv);

}  // namespace forkbox::parent
