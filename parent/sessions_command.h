// `forkbox sessions`: the saved sessions (parent/session_store.h) a run can resume.
#pragma once

namespace forkbox::parent {

// `forkbox sessions [--workdir DIR]`: id, time, workdir, turns, tokens and first prompt of each
// saved session, most recent first; with --workdir only that directory's (the ones --continue
// picks from there). argv[0] is "sessions". Returns the process exit code (0, or 2 on a usage
// error: any other argument, or a workdir that is not a directory).
int SessionsCommandMain(int argc, char** argv);

}  // namespace forkbox::parent
