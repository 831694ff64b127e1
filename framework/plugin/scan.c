/* Describing a plugin file without risking the runner: its entry point runs in the
 * scanner program (qhost-plugin-scan, spawned with exec, never a bare fork of this
 * possibly threaded process), which prints a JSON description. The parent enforces a
 * time limit and an output cap and turns a crash or a hang into one line, as
 * GStreamer's plugin scanner does. QHOST_SCAN_SUBPROCESS=0 scans in-process instead,
 * for running under a debugger. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "plugin/plugin.h"
#include "hostapi/sdk-private.h"

#define SCAN_OUTPUT_CAP (1 << 20)
#define SCAN_TIMEOUT_DEFAULT 10

static const char *signal_name(int sig) {
  switch (sig) {
  case SIGSEGV: return "SIGSEGV";
  case SIGBUS: return "SIGBUS";
  case SIGILL: return "SIGILL";
  case SIGFPE: return "SIGFPE";
  case SIGABRT: return "SIGABRT";
  case SIGKILL: return "SIGKILL";
  case SIGTERM: return "SIGTERM";
  case SIGTRAP: return "SIGTRAP";
  default: return NULL;
  }
}

static int scan_timeout(void) {
  const char *env = g_getenv("QHOST_PLUGIN_SCAN_TIMEOUT");
  if (env) {
    char *end;
    long v = strtol(env, &end, 10);
    if (*env && *end == '\0' && v >= 1 && v <= 3600)
      return (int)v;
  }
  return SCAN_TIMEOUT_DEFAULT;
}

static gint64 now_ms(void) { return g_get_monotonic_time() / 1000; }

/* Read the child's stdout until EOF, the cap, or the deadline. Returns FALSE on timeout. */
static gboolean read_output(int fd, GString *out, gint64 deadline, gboolean *capped) {
  char buf[8192];
  for (;;) {
    gint64 left = deadline - now_ms();
    if (left <= 0)
      return FALSE;
    struct pollfd p = {fd, POLLIN, 0};
    int r = poll(&p, 1, (int)MIN(left, 1000));
    if (r < 0 && errno == EINTR)
      continue;
    if (r == 0)
      continue;
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return TRUE;
    if (out->len + (gsize)n > SCAN_OUTPUT_CAP) {
      *capped = TRUE;
      return TRUE;
    }
    g_string_append_len(out, buf, n);
  }
}

/* Wait for the child until the deadline; FALSE if it is still running then. */
static gboolean wait_child(GPid pid, int *status, gint64 deadline) {
  for (;;) {
    pid_t r = waitpid(pid, status, WNOHANG);
    if (r == pid)
      return TRUE;
    if (r < 0 && errno != EINTR)
      return TRUE;
    if (now_ms() >= deadline)
      return FALSE;
    g_usleep(5000);
  }
}

static QhPluginInfo *parse_answer(const char *path, const GString *out, int status, GError **error) {
  JsonParser *parser = json_parser_new();
  QhPluginInfo *info = NULL;
  GError *local = NULL;
  if (out->len == 0 || !json_parser_load_from_data(parser, out->str, (gssize)out->len, &local)) {
    g_clear_error(&local);
    g_set_error(error, QH_ERROR, QH_ERROR_FAILED,
                "%s: the plugin scanner exited with status %d without a description", path,
                WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    g_object_unref(parser);
    return NULL;
  }
  JsonNode *root = json_parser_get_root(parser);
  JsonObject *o = root && JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : NULL;
  JsonNode *err = o ? json_object_get_member(o, "error") : NULL;
  if (err && JSON_NODE_HOLDS_VALUE(err) && json_node_get_value_type(err) == G_TYPE_STRING) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s", json_node_get_string(err));
  } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    g_set_error(error, QH_ERROR, QH_ERROR_FAILED, "%s: the plugin scanner failed (status %d)", path,
                WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  } else {
    info = qh_plugin_info_from_json(root, &local);
    if (info == NULL) {
      g_set_error(error, QH_ERROR, QH_ERROR_PARSE, "%s: %s", path, local->message);
      g_error_free(local);
    }
  }
  g_object_unref(parser);
  return info;
}

QhPluginInfo *qh_plugin_scan(const char *path, const char *expected_name, GError **error) {
  const char *mode = g_getenv("QHOST_SCAN_SUBPROCESS");
  if (mode && strcmp(mode, "0") == 0)
    return qh_plugin_describe_file(path, expected_name, error);
  char *scanner = qh_plugin_scanner_path();
  char *argv[] = {scanner, (char *)path, (char *)expected_name, NULL};
  GPid pid;
  int out_fd = -1;
  GError *local = NULL;
  /* Stdin closed, stderr shared (a sanitizer report stays visible), stdout piped. */
  gboolean spawned = g_spawn_async_with_pipes(NULL, argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD, NULL,
                                              NULL, &pid, NULL, &out_fd, NULL, &local);
  if (!spawned) {
    g_set_error(error, QH_ERROR, QH_ERROR_IO, "%s: cannot start the plugin scanner %s: %s", path,
                scanner, local->message);
    g_error_free(local);
    g_free(scanner);
    return NULL;
  }
  g_free(scanner);
  int timeout = scan_timeout();
  gint64 deadline = now_ms() + (gint64)timeout * 1000;
  GString *out = g_string_new(NULL);
  gboolean capped = FALSE;
  gboolean answered = read_output(out_fd, out, deadline, &capped);
  close(out_fd);
  int status = 0;
  if (answered && !capped)
    answered = wait_child(pid, &status, deadline);
  if (!answered || capped) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    g_spawn_close_pid(pid);
    if (capped)
      g_set_error(error, QH_ERROR, QH_ERROR_LIMIT, "%s: the plugin scanner wrote more than %d bytes",
                  path, SCAN_OUTPUT_CAP);
    else
      g_set_error(error, QH_ERROR, QH_ERROR_FAILED, "%s: did not answer within %d s", path, timeout);
    g_string_free(out, TRUE);
    return NULL;
  }
  g_spawn_close_pid(pid);
  QhPluginInfo *info = NULL;
  if (WIFSIGNALED(status)) {
    const char *name = signal_name(WTERMSIG(status));
    if (name)
      g_set_error(error, QH_ERROR, QH_ERROR_FAILED, "%s: crashed while loading (%s)", path, name);
    else
      g_set_error(error, QH_ERROR, QH_ERROR_FAILED, "%s: crashed while loading (signal %d)", path,
                  WTERMSIG(status));
  } else {
    info = parse_answer(path, out, status, error);
  }
  g_string_free(out, TRUE);
  return info;
}
