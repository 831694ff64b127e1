/* The qhost runner's entry point: global --help and --version, and dispatch to one
 * subcommand, each in its own file. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/spin-policy.h"

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
  /* libgomp reads its environment once, in its constructor, and libqhost links it (the
   * host's fp32 engine is oneDNN), so it has read it before main runs: the runner sets
   * GOMP_SPINCOUNT (spin-policy.c says how it is chosen) and executes itself again. A
   * user's OMP_WAIT_POLICY or GOMP_SPINCOUNT wins; when the exec fails the run goes on
   * with libgomp's default. */
  if (!g_getenv("OMP_WAIT_POLICY") && !g_getenv("GOMP_SPINCOUNT")) {
    int threads = qh_spin_threads_requested(argc, argv);
    const char *why = "one thread";
    int spin = threads > 1 ? qh_spin_for_this_machine(threads, &why) : QH_SPIN_SHARED;
    char value[16];
    g_snprintf(value, sizeof value, "%d", spin);
    g_setenv("GOMP_SPINCOUNT", value, TRUE);
    g_setenv("QHOST_SPIN_CHOICE", why, TRUE);
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
