#include "child/child.h"

int main(int argc, char** argv) { return forkbox::child::ChildMain(argc, argv); }
