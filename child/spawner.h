// The spawner's server side: forkbox-child run as `forkbox-child --spawner CHILD_PATH
// [--verbose]` (ipc/spawner_wire.h), started by the parent (parent/spawner.h) before the parent
// confines itself. It is a program of its own, exec'ed rather than forked, so it holds none of the
// parent's memory (the API key) and the parent's page tables are never copied for it.
//
// What it does is fixed when it starts: the program (CHILD_PATH, absolute), the environment (its
// own, which the parent scrubbed), the workdir descriptor. A request says only "start a task
// child" and carries the child's pipe ends (and a transcript file) as SCM_RIGHTS; no path, argv or
// environment. Every request is validated (size, magic, version, kind, flags, the number and the
// kind of each descriptor); a malformed one gets an error reply and starts nothing. The child is
// cloned with CLONE_PARENT, so it is the parent's own child (waitid, pidfd signals, PDEATHSIG on
// the parent), and its pidfd comes back as SCM_RIGHTS. The spawner confines itself before its
// first request (sandbox::ConfineSpawner) and dies with the parent (PDEATHSIG, set before its
// exec, and EOF on the socket).
#pragma once

namespace forkbox::child {

// Whether this invocation is the spawner's: argv[1] is ipc::kSpawnerFlag. Needs nothing set up, so
// that an initialiser may ask (child/main.cc).
bool IsSpawner(int argc, char** argv);

// IsSpawner(argc, argv) holds. Serves until the parent closes its end; returns 2 for bad usage and
// 1 when the spawner cannot start.
int SpawnerMain(int argc, char** argv);

}  // namespace forkbox::child
