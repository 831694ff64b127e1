/* Unit tests of the runner's GOMP_SPINCOUNT choice: reading --threads from the command
 * line, reading procs_running from /proc/stat's text (real and malformed), the decision
 * at the edges (workers that just fit, one too many, an unknown load), and one sample of
 * this machine that must come back with a reason. */
#include <string.h>

#include <glib.h>

#include "cli/spin-policy.h"

static int threads_of(const char *line) {
  char **argv = g_strsplit(line, " ", -1);
  int n = qh_spin_threads_requested((int)g_strv_length(argv), argv);
  g_strfreev(argv);
  return n;
}

static void test_threads_requested(void) {
  g_assert_cmpint(threads_of("qhost run m.onnx"), ==, 1);
  g_assert_cmpint(threads_of("qhost bench --threads 2 m.onnx"), ==, 2);
  g_assert_cmpint(threads_of("qhost bench --threads=4 m.onnx"), ==, 4);
  g_assert_cmpint(threads_of("qhost bench --threads 2 --threads=3 m.onnx"), ==, 3);
  g_assert_cmpint(threads_of("qhost bench --threads x m.onnx"), ==, 1);
  g_assert_cmpint(threads_of("qhost bench --threads=2x m.onnx"), ==, 1);
  g_assert_cmpint(threads_of("qhost bench --threads=-2 m.onnx"), ==, 1);
  g_assert_cmpint(threads_of("qhost bench m.onnx --threads"), ==, 1);
}

static void test_parse_procs_running(void) {
  const char *stat = "\ncpu  1 2 3 4\ncpu0 1 2 3 4\nintr 5 6\nctxt 7\nbtime 8\nprocesses 9\n"
                     "procs_running 3\nprocs_blocked 0\nsoftirq 1 2\n";
  g_assert_cmpint(qh_spin_parse_procs_running(stat), ==, 3);
  g_assert_cmpint(qh_spin_parse_procs_running("\nprocs_running 12"), ==, 12);
  g_assert_cmpint(qh_spin_parse_procs_running("\ncpu 1 2\nprocs_blocked 0\n"), ==, -1);
  g_assert_cmpint(qh_spin_parse_procs_running("\nprocs_running \n"), ==, -1);
  g_assert_cmpint(qh_spin_parse_procs_running("\nprocs_running 2x\n"), ==, -1);
  g_assert_cmpint(qh_spin_parse_procs_running("\nprocs_running -1\n"), ==, -1);
  /* "procs_running" inside another line is not the counter */
  g_assert_cmpint(qh_spin_parse_procs_running("\nxprocs_running 5\n"), ==, -1);
}

static void test_choose(void) {
  g_assert_cmpint(qh_spin_choose(2, 0, 2), ==, QH_SPIN_IDLE);
  g_assert_cmpint(qh_spin_choose(2, 1, 2), ==, QH_SPIN_SHARED);
  g_assert_cmpint(qh_spin_choose(2, 2, 4), ==, QH_SPIN_IDLE);
  g_assert_cmpint(qh_spin_choose(4, 1, 4), ==, QH_SPIN_SHARED);
  g_assert_cmpint(qh_spin_choose(2, -1, 8), ==, QH_SPIN_SHARED);
  g_assert_cmpint(qh_spin_choose(2, 0, 0), ==, QH_SPIN_SHARED);
  g_assert_cmpint(QH_SPIN_IDLE, >, QH_SPIN_SHARED);
}

static void test_this_machine(void) {
  const char *why = NULL;
  int spin = qh_spin_for_this_machine(2, &why);
  g_assert_true(spin == QH_SPIN_IDLE || spin == QH_SPIN_SHARED);
  g_assert_nonnull(why);
  g_assert_cmpuint(strlen(why), >, 0);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/spin_policy/threads_requested", test_threads_requested);
  g_test_add_func("/spin_policy/parse_procs_running", test_parse_procs_running);
  g_test_add_func("/spin_policy/choose", test_choose);
  g_test_add_func("/spin_policy/this_machine", test_this_machine);
  return g_test_run();
}
