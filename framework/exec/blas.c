/* Describes the BLAS kernel set in use (see blas.h). */
#include "exec/blas.h"

#include <cblas.h>
#include <stdlib.h>

static gpointer describe_once(gpointer unused) {
  (void)unused;
  const char *forced = getenv("OPENBLAS_CORETYPE");
  if (forced != NULL && *forced != '\0')
    return g_strdup_printf("OpenBLAS %s kernels (OPENBLAS_CORETYPE=%s)", openblas_get_corename(),
                           forced);
  return g_strdup_printf("OpenBLAS %s kernels", openblas_get_corename());
}

const char *qh_blas_describe(void) {
  static GOnce once = G_ONCE_INIT;
  return g_once(&once, describe_once, NULL);
}
