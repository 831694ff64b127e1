/* The qhost runner: parses the global options and dispatches to one subcommand. */
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--version") == 0) {
    printf("qhost %s\n", QHOST_VERSION);
    return 0;
  }
  fprintf(stderr, "usage: qhost [--version]\n");
  return 2;
}
