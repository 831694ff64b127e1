/* Describes the BLAS kernel set and the convolution engine in use (see blas.h). */
#include "exec/blas.h"

#include "exec/onednn.h"

#include <cblas.h>
#include <stdlib.h>

static gpointer describe_once(gpointer unused) {
  (void)unused;
  const char *forced = getenv("OPENBLAS_CORETYPE");
  if (forced != NULL && *forced != '\0')
    return g_strdup_printf("OpenBLAS %s kernels (OPENBLAS_CORETYPE=%s); %s", openblas_get_corename(),
                           forced, qh_onednn_describe());
  return g_strdup_printf("OpenBLAS %s kernels; %s", openblas_get_corename(), qh_onednn_describe());
}

const char *qh_blas_describe(void) {
  static GOnce once = G_ONCE_INIT;
  return g_once(&once, describe_once, NULL);
}
