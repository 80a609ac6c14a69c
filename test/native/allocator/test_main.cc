// test_main.cc — runs every registered case (or those whose name contains argv[1]) with the one harness
// (test/native/check.h); the last line is "N passed, N failed" and the exit status is non-zero on any failure.
#include "../check.h"

int main(int argc, char** argv) { return t::main("allocator", argc, argv); }
