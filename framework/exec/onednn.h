/* The host's oneDNN: one CPU engine for the fp32 convolutions (kernels/conv-onednn.c)
 * and the sgemm (sgemm.c), and the ISA cap that follows QHOST_CPU_DISABLE.
 *
 * oneDNN picks its JIT kernels from the CPU at run time (AVX-512, AVX2, SSE4.1), and
 * its choice is capped once per process, before its first primitive: here to the
 * features the host reports (plugin/host-api.c), so that the AVX2 and SSE4.1 paths can
 * be tested on an AVX-512 machine. The cap is the one the x86 plugin sets when VNNI is
 * absent and none when every feature is present, and oneDNN keeps the first cap a
 * process sets, so the host and the plugin never disagree.
 * Threading: every function may be called from any thread. */
#ifndef QH_EXEC_ONEDNN_H
#define QH_EXEC_ONEDNN_H

#include <glib.h>
#include <oneapi/dnnl/dnnl.h>

G_BEGIN_DECLS

/* The CPU engine (created on the first call, after the ISA cap; owned by this module
 * for the process's lifetime), or NULL when oneDNN cannot create one: callers then
 * take their OpenBLAS path. */
dnnl_engine_t qh_onednn_engine(void);

/* FALSE when the float path must stay on OpenBLAS for the whole process: the environment
 * sets QHOST_FP32_ENGINE=openblas (every context then behaves as bit-compatible), or
 * oneDNN has no engine. Read once. */
gboolean qh_onednn_enabled(void);

/* "oneDNN 2.6.3, ISA avx512_core_amx": the version and the ISA oneDNN dispatches to
 * after the cap, or why there is no engine; static storage, computed once. */
const char *qh_onednn_describe(void);

/* Set the calling thread's OpenMP team size (the thread count oneDNN uses for calls
 * from this thread) to threads and return the previous one, which the caller puts back
 * with qh_onednn_threads_restore after its calls: the x86 plugin sets its own on the
 * same threads. */
int qh_onednn_threads_set(int threads);
void qh_onednn_threads_restore(int previous);

G_END_DECLS

#endif
