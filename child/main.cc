#include "base/startup.h"
#include "child/child.h"

// First of the initialisers: the rest of start-up runs on mapped code (base/startup.h). A hint,
// so its result is not checked.
__attribute__((constructor(101))) static void MapCode() { (void)forkbox::PrefaultCode(); }

int main(int argc, char** argv) { return forkbox::child::ChildMain(argc, argv); }
