/* Shared between the recurrent ops' reference kernels (rnn.c: attributes, shape
 * inference, the naive loops) and their fast path (rnn-fast.c). Not a public header.
 * Threading: every function here is reentrant; the kernels run on the calling thread
 * and on ctx's pool through qh_sgemm. */
#ifndef QH_EXEC_KERNELS_RNN_PRIVATE_H
#define QH_EXEC_KERNELS_RNN_PRIVATE_H

#include "exec/kernels/common.h"

typedef enum { RNN_LSTM, RNN_GRU } RnnKind;

typedef struct {
  RnnKind kind;
  int gates;     /* 4 (LSTM: i, o, f, c) or 3 (GRU: z, r, h) */
  int dirs;      /* 1 or 2 */
  gboolean reverse; /* direction "reverse" (dirs == 1) */
  int64_t seq, batch, input, hidden;
  float clip;    /* <= 0: none */
  gboolean lbr;  /* GRU linear_before_reset */
} Rnn;

/* The fast LSTM/GRU: r as read and checked by rnn.c (shapes inferred), the node's inputs
 * and outputs as the executor passes them. Same formulas as the naive loops, with the
 * input projection of all time steps as one GEMM, the recurrent product as a vector
 * loop and the gate activations on arrays; results agree with the naive loops to float
 * rounding (tests/unit/test_rnn_fast.c). Uses ctx's scratch buffer. Errors: out of
 * memory or dimensions past the GEMM's int range (QH_ERROR_LIMIT, naming the node). */
gboolean qh_rnn_run_fast(QhExecContext *ctx, const QhNode *node, const Rnn *r,
                         const QhTensor *const *inputs, int n_inputs, QhTensor *const *outputs,
                         int n_outputs, GError **error);

/* y[i] = tanh(x[i]) for i < n, relative error below 1e-6 (an odd polynomial below
 * |x| = 0.25, 2 sigmoid(2x) - 1 above, on qh_sigmoid_f32's vector lanes; glibc's tanhf
 * is the naive kernels' and three times slower). x and y may be the same array; work
 * holds n floats and must not overlap either. */
void qh_rnn_tanh_f32(const float *x, float *y, int64_t n, float *work);

/* acc[j] += sum_{k < n_k} v[k] * m[k * ld + j] for j < n: a row vector times a row-major
 * matrix, AVX-512 or AVX2+FMA lanes where the CPU has them (QHOST_CPU_DISABLE hides
 * them), a scalar loop elsewhere. acc must not overlap m or v. */
void qh_rnn_vecmat_f32(const float *v, const float *m, int64_t n_k, int64_t n, int64_t ld, float *acc);

#endif
