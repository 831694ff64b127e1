/* Catching output a plugin writes to stdout or stderr (which it must never do): file
 * descriptors 1 and 2 point at a temporary file between begin and end, and end says
 * how many bytes arrived. Not thread-safe: use around calls made from one thread while
 * no other thread prints. */
#ifndef QH_PLUGIN_CAPTURE_PRIVATE_H
#define QH_PLUGIN_CAPTURE_PRIVATE_H

#include <stdio.h>

typedef struct {
  FILE *file;
  int saved_out;
  int saved_err;
} QhOutputCapture;

void qh_output_capture_begin(QhOutputCapture *capture);
/* Restores fds 1 and 2; returns the bytes written meanwhile. */
long qh_output_capture_end(QhOutputCapture *capture);

#endif
