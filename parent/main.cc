#include "parent/parent.h"

int main(int argc, char** argv) { return forkbox::parent::ParentMain(argc, argv); }
