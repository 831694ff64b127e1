/* The runner's choice of GOMP_SPINCOUNT. With --threads N > 1 a backend's OpenMP team
 * (oneDNN's libgomp) runs one parallel region per unit, and a worker that sleeps between
 * regions costs a wake-up per unit: on a 2-core VM mobilenet_v3's int8 run takes 6.2 ms
 * at 2 threads with a 1000-round spin against 3.6 ms at 1 thread, and 2.8 ms with 30000
 * rounds. But a long spin holds the cores when something else needs them (beside two
 * busy processes the same run takes 63 ms with 30000 rounds, 6.3 ms with 1000). So the
 * runner looks at the machine once, before libgomp starts: when the tasks already
 * runnable leave a core for every worker it spins long, otherwise short. The minimum
 * over a few samples of /proc/stat's procs_running is the load that stays, not a
 * passing kernel thread; a benchmark's own earlier runs are not counted, which the
 * load average would do. */
#include "cli/spin-policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int qh_spin_threads_requested(int argc, char **argv) {
  int threads = 1;
  for (int i = 1; i < argc; i++) {
    const char *value = NULL;
    if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
      value = argv[i + 1];
    else if (strncmp(argv[i], "--threads=", 10) == 0)
      value = argv[i] + 10;
    if (value != NULL) {
      char *end = NULL;
      long n = strtol(value, &end, 10);
      threads = (end != value && *end == '\0' && n > 0 && n < 4096) ? (int)n : 1;
    }
  }
  return threads;
}

int qh_spin_parse_procs_running(const char *stat_text) {
  const char *line = strstr(stat_text, "\nprocs_running ");
  if (line == NULL)
    return -1;
  char *end = NULL;
  long n = strtol(line + strlen("\nprocs_running "), &end, 10);
  if (end == line + strlen("\nprocs_running ") || (*end != '\n' && *end != '\0') || n < 0 || n > 1 << 20)
    return -1;
  return (int)n;
}

int qh_spin_choose(int threads, int others, int cpus) {
  if (others < 0 || cpus < 1)
    return QH_SPIN_SHARED;
  return others + threads <= cpus ? QH_SPIN_IDLE : QH_SPIN_SHARED;
}

static int read_procs_running(void) {
  FILE *f = fopen("/proc/stat", "r");
  if (f == NULL)
    return -1;
  /* Line by line: the "intr" line alone can be longer than any fixed buffer. */
  char *line = NULL;
  size_t cap = 0;
  int running = -1;
  while (running < 0 && getline(&line, &cap, f) > 0) {
    if (strncmp(line, "procs_running ", 14) == 0) {
      char text[64];
      snprintf(text, sizeof text, "\n%s", line);
      running = qh_spin_parse_procs_running(text);
    }
  }
  free(line);
  fclose(f);
  return running;
}

int qh_spin_for_this_machine(int threads, const char **why) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int others = -1;
  for (int sample = 0; sample < 5; sample++) {
    int running = read_procs_running();
    if (running < 0) {
      others = -1;
      break;
    }
    /* This process is one of the runnable tasks. */
    int now = running > 0 ? running - 1 : 0;
    others = (sample == 0 || now < others) ? now : others;
    if (sample < 4)
      nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
  }
  int spin = qh_spin_choose(threads, others, (int)cpus);
  *why = others < 0             ? "the machine's load could not be read"
         : spin == QH_SPIN_IDLE ? "a core is free for every worker"
                                : "other tasks compete for the cores";
  return spin;
}
