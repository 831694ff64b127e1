/* Redirecting fds 1 and 2 around plugin calls, so that the scanner's JSON stays clean
 * and plugin-check can tell a vendor that their plugin printed. */
#include <stdint.h>
#include <unistd.h>

#include "plugin/capture-private.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
/* Sanitizer reports must reach the real stderr, not the capture file. */
static void report_to(int fd) { __sanitizer_set_report_fd((void *)(intptr_t)fd); }
#else
static void report_to(int fd) { (void)fd; }
#endif

void qh_output_capture_begin(QhOutputCapture *c) {
  fflush(stdout);
  fflush(stderr);
  c->file = tmpfile();
  c->saved_out = dup(STDOUT_FILENO);
  c->saved_err = dup(STDERR_FILENO);
  if (c->file && c->saved_out >= 0 && c->saved_err >= 0) {
    report_to(c->saved_err);
    dup2(fileno(c->file), STDOUT_FILENO);
    dup2(fileno(c->file), STDERR_FILENO);
  }
}

long qh_output_capture_end(QhOutputCapture *c) {
  fflush(stdout);
  fflush(stderr);
  if (c->saved_out >= 0) {
    dup2(c->saved_out, STDOUT_FILENO);
    close(c->saved_out);
  }
  if (c->saved_err >= 0) {
    dup2(c->saved_err, STDERR_FILENO);
    report_to(STDERR_FILENO);
    close(c->saved_err);
  }
  long bytes = 0;
  if (c->file) {
    fseek(c->file, 0, SEEK_END);
    bytes = ftell(c->file);
    fclose(c->file);
  }
  c->file = NULL;
  c->saved_out = c->saved_err = -1;
  return bytes;
}
