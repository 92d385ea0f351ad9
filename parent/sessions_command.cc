#include "parent/sessions_command.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <ctime>
#include <string>

#include "base/format.h"
#include "parent/cli.h"
#include "parent/config.h"
#include "parent/exit_codes.h"
#include "parent/session_store.h"
#include "parent/stats.h"
#include "parent/terminal.h"

namespace forkbox::parent {
namespace {

std::string Ellipsis(std::string s, size_t max) {
  for (char& c : s) c = (c == '\n' || c == '\t') ? ' ' : c;
  if (s.size() <= max) return s;
  size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return s.substr(0, cut) + "...";
}

std::string Line(const SessionInfo& info) {
  char when[32];
  std::time_t t = static_cast<std::time_t>(info.modified);
  struct tm tm_local;
  localtime_r(&t, &tm_local);
  std::strftime(when, sizeof(when), "%Y-%m-%d %H:%M", &tm_local);
  return info.id + "  " + when + "  " + info.workdir + "  " + Plural(info.turns, "turn") + "  " +
         Plural(info.tokens, "token") + "  " +
         (info.first_prompt.empty() ? "(interactive)" : Ellipsis(info.first_prompt, 60)) + "\n";
}

int UsageError(const std::string& message) {
  WriteText(STDERR_FILENO, "forkbox sessions: " + message + "\n");
  return kExitUsage;
}

}  // namespace

int SessionsCommandMain(int argc, char** argv) {
  CLI::App app{
      "forkbox sessions: the saved sessions, most recent first; resume one with --resume ID, "
      "or the latest of a workdir with --continue",
      "forkbox sessions"};
  Options o;
  app.add_option("--workdir", o.workdir, "Only the sessions of this project directory")
      ->check(NonEmpty());
  if (std::optional<std::string> empty = EmptyInlineValue(argc, argv)) {
    return UsageError(*empty + ": the value is empty");
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return SubcommandParseExit(app, e);
  }
  std::string only;  // Empty: every workdir's.
  if (app.count("--workdir") > 0) {
    Result<std::string> workdir = ResolveWorkdir(o);
    if (!workdir.ok()) return UsageError(workdir.status().message());
    only = *workdir;
  }
  auto dir = OpenSessionsDir(false);
  if (!dir.ok() && dir.status().code() == Status::Code::kNotFound) {  // None was ever saved.
    return PrintOutput("no sessions in " + ForkboxStateDir().value() + "/sessions\n", kExitOk);
  }
  // A link where forkbox keeps its own is named and not followed: nothing listed, nothing removed.
  if (!dir.ok()) return UsageError("sessions not listed: " + dir.status().message());
  std::string out;
  for (const SessionInfo& info : ListSessions(*dir)) {
    if (only.empty() || info.workdir == only) out += Line(info);
  }
  if (out.empty()) {
    out = "no sessions" + (only.empty() ? "" : " of " + only) + " in " + dir->path + "\n";
  }
  return PrintOutput(out, kExitOk);
}

}  // namespace forkbox::parent
