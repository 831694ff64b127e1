/* How long libgomp's idle workers spin before they sleep, chosen by the runner before
 * libgomp reads its environment. Not thread-safe: call from main() before any thread.
 * No function here fails: what cannot be read counts as a busy machine. */
#ifndef QH_CLI_SPIN_POLICY_H
#define QH_CLI_SPIN_POLICY_H

/* The spin for a machine where the run's workers have the cores to themselves. */
#define QH_SPIN_IDLE 30000
/* The spin when other work competes for the cores. */
#define QH_SPIN_SHARED 1000

/* The worker threads the command line asks for (--threads N or --threads=N, the last
 * one wins; 1 when absent or not a positive number). */
int qh_spin_threads_requested(int argc, char **argv);

/* The runnable tasks /proc/stat's text reports (its "procs_running N" line; the text
 * starts with a newline), or -1 when the line is missing or malformed. */
int qh_spin_parse_procs_running(const char *stat_text);

/* The spin for a run of `threads` workers when `others` tasks besides this process are
 * runnable on `cpus` online CPUs: QH_SPIN_IDLE when the workers fit beside the others,
 * QH_SPIN_SHARED otherwise or when `others` is unknown (< 0). */
int qh_spin_choose(int threads, int others, int cpus);

/* Samples /proc/stat five times, 1 ms apart, and returns the spin for this run; `why`
 * receives the reason (a static string, never NULL). */
int qh_spin_for_this_machine(int threads, const char **why);

#endif
