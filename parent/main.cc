#include "base/startup.h"
#include "parent/parent.h"

// First of the initialisers: the rest of start-up runs on mapped code (base/startup.h). A hint,
// so its result is not checked.
__attribute__((constructor(101))) static void MapCode() { (void)forkbox::PrefaultCode(); }

int main(int argc, char** argv) { return forkbox::parent::ParentMain(argc, argv); }
