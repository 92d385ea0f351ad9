#include "base/startup.h"
#include "child/child.h"
#include "child/spawner.h"

// First of the initialisers: the rest of start-up runs on mapped code (base/startup.h). A hint,
// so its result is not checked. Not in the spawner: it runs little code, and it starts while the
// parent prepares its first model request, so mapping ~3 MiB there only takes CPU from the parent.
// glibc passes the main executable's initialisers argc and argv, as it passes main.
__attribute__((constructor(101))) static void MapCode(int argc, char** argv) {
  if (forkbox::child::IsSpawner(argc, argv)) return;
  (void)forkbox::PrefaultCode();
}

int main(int argc, char** argv) { return forkbox::child::ChildMain(argc, argv); }
