/* The qhost runner's entry point: global --help and --version, and dispatch to one
 * subcommand, each in its own file. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

typedef struct {
  const char *name;
  QhCliCommandFn fn;
  const char *summary;
} Command;

static const Command commands[] = {
    {"inspect", qh_cli_inspect, "show a model's inputs, outputs, nodes, parameters, MACs and qparams"},
    {"quantize", qh_cli_quantize, "quantize a float model for a backend into a QDQ ONNX model, with a report"},
    {"calibrate", qh_cli_calibrate, "save one calibration shard's observer statistics (merged by quantize --stats)"},
    {"run", qh_cli_run, "run a model on .npy/.npz inputs and write its outputs"},
    {"bench", qh_cli_bench, "time a model: warm-up, repeated runs, median/min/max latency"},
    {"deploy", qh_cli_deploy, "write a backend's deployable artefact for a QDQ model into a directory"},
    {"plugins", qh_cli_plugins, "list the backend plugins found: name, version, ABI, file, what each supplies"},
    {"plugin-check", qh_cli_plugin_check, "check that a plugin conforms to the ABI (a vendor's first command)"},
};

static void print_help(FILE *out) {
  fprintf(out,
          "Usage: qhost COMMAND [OPTIONS] ...\n"
          "\n"
          "qhost quantizes float ONNX models with loadable backends and runs them.\n"
          "\n"
          "Commands:\n");
  for (size_t i = 0; i < G_N_ELEMENTS(commands); i++)
    fprintf(out, "  %-13s %s\n", commands[i].name, commands[i].summary);
  fprintf(out,
          "\n"
          "Options:\n"
          "  -h, --help     show this help\n"
          "  --version      show the version\n"
          "\n"
          "'qhost COMMAND --help' describes a command. Exit status: 0 success, 1 the work\n"
          "failed (one line on stderr names the file and the cause), 2 bad command line.\n");
}

int main(int argc, char **argv) {
  /* A backend's OpenMP team (oneDNN's libgomp, with --threads N > 1) runs one parallel
   * region per unit. Workers that sleep between regions are woken for every unit
   * (resnet18 on x86, 2 threads, 2 cores: 3.2 ms passive, 2.8 ms with this spin), but
   * workers that spin long hold the cores when something else needs them: beside
   * another busy process the same run takes 5.2 ms passive, 6.5-7.7 ms with this spin,
   * 15-23 ms with 10000 rounds (libgomp's default is 300000). So a short spin; a user's
   * OMP_WAIT_POLICY or GOMP_SPINCOUNT wins. libgomp reads its environment once, in its
   * constructor, and libqhost links it (the host's fp32 engine is oneDNN), so it has
   * read it before main runs: the runner sets the variable and executes itself again
   * (x86 int8 resnet18, 2 threads, beside one busy process: median 26-67 ms with the
   * default spin, 2.1-7.4 ms with this one). When the exec fails the run goes on with
   * libgomp's default. */
  if (!g_getenv("OMP_WAIT_POLICY") && !g_getenv("GOMP_SPINCOUNT")) {
    g_setenv("GOMP_SPINCOUNT", "1000", TRUE);
    execv("/proc/self/exe", argv);
  }
  if (argc < 2) {
    print_help(stderr);
    return QH_EXIT_USAGE;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
    print_help(stdout);
    return QH_EXIT_OK;
  }
  if (strcmp(cmd, "--version") == 0) {
    printf("qhost %s\n", QHOST_VERSION);
    return QH_EXIT_OK;
  }
  for (size_t i = 0; i < G_N_ELEMENTS(commands); i++)
    if (strcmp(cmd, commands[i].name) == 0)
      return commands[i].fn(argc - 1, argv + 1);
  fprintf(stderr, "qhost: unknown command '%s'; 'qhost --help' lists the commands\n", cmd);
  return QH_EXIT_USAGE;
}
