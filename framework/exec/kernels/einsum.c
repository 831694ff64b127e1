/* Reference kernels of Einsum (opset 12) on float32, for the equations exporters
 * write from torch.einsum: attention scores and contexts ("bhqd,bhkd->bhqk",
 * "bhqk,bhkd->bhqd"), batched projections ("bij,jk->bik"), outer products, traces and
 * transposes, with or without an ellipsis, explicit ("->") or implicit output.
 *
 * The equation is parsed once per call into labels: letters (ASCII order, which is
 * the implicit output's order) and one label per ellipsis dimension, right-aligned
 * across operands and broadcast where an operand's dimension is 1 (NumPy's rule).
 * Each operand reads a label through a stride: the sum of its axes' strides carrying
 * that label (a repeated label is a diagonal), 0 where it broadcasts. A label absent
 * from the output is summed over. An equation that does not parse, a term whose rank
 * differs from its operand's, a letter with two sizes, or an output letter no input
 * has is one error naming the equation.
 *
 * The naive twin walks every combination of label values and adds the product of
 * the operands' elements in double. The fast path handles two operands whose every
 * summed label appears in both (a batched matrix product): it packs A as
 * [batch][M][K] and B as [batch][K][N], runs one sgemm per batch index, and writes
 * the [batch][M][N] result back in the output's label order; other equations take
 * the naive loop. */
#include <string.h>

#include "exec/kernels/common.h"
#include "exec/sgemm-private.h"

#define N_LETTERS 52
#define MAX_LABELS (N_LETTERS + QH_MAX_RANK)
#define MAX_OPERANDS 8
/* Multiply-adds one Einsum may cost: bounds the time a hostile equation can ask for. */
#define MAX_WORK (INT64_C(1) << 40)

typedef struct {
  int n_ops;
  int rank[MAX_OPERANDS];
  int axis_label[MAX_OPERANDS][QH_MAX_RANK];
  int n_out;
  int out_label[QH_MAX_RANK];
  int64_t size[MAX_LABELS]; /* -1: label unused */
  int64_t stride[MAX_OPERANDS][MAX_LABELS];
  gboolean in_op[MAX_OPERANDS][MAX_LABELS];
  gboolean in_out[MAX_LABELS];
} Eq;

static int letter_label(char c) {
  if (c >= 'A' && c <= 'Z')
    return c - 'A';
  if (c >= 'a' && c <= 'z')
    return 26 + (c - 'a');
  return -1;
}

static char label_letter(int l) { return l < 26 ? (char)('A' + l) : (char)('a' + l - 26); }

/* One term ("bhqd", "...ij"): its letters' labels in order, with -2 for the ellipsis
 * position. Returns FALSE with *why set on a character that is not a letter or a
 * second ellipsis. */
static gboolean parse_term(const char *t, size_t len, int *labels, int *n, const char **why) {
  gboolean ellipsis = FALSE;
  *n = 0;
  for (size_t i = 0; i < len; i++) {
    if (t[i] == '.') {
      if (i + 2 >= len || t[i + 1] != '.' || t[i + 2] != '.') {
        *why = "a '.' that is not part of '...'";
        return FALSE;
      }
      if (ellipsis) {
        *why = "two ellipses in one term";
        return FALSE;
      }
      ellipsis = TRUE;
      i += 2;
      if (*n >= QH_MAX_RANK + 1) {
        *why = "a term with more dimensions than qhost supports";
        return FALSE;
      }
      labels[(*n)++] = -2;
      continue;
    }
    int l = letter_label(t[i]);
    if (l < 0) {
      *why = "a character that is not a letter, ',', '...' or '->'";
      return FALSE;
    }
    if (*n >= QH_MAX_RANK + 1) {
      *why = "a term with more dimensions than qhost supports";
      return FALSE;
    }
    labels[(*n)++] = l;
  }
  return TRUE;
}

static gboolean bad_equation(const QhNode *node, const char *eq, const char *why, GError **error) {
  return qh_kernel_fail(error, node, QH_ERROR_INVALID, "equation '%s' does not parse: %s", eq, why);
}

static gboolean parse(const QhNode *node, const QhTensor *const *inputs, int n_inputs, Eq *q,
                      GError **error) {
  const char *raw = NULL;
  if (!qh_node_attr_get_string(node, "equation", NULL, &raw, error))
    return FALSE;
  if (raw == NULL)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "attribute 'equation' is missing");
  /* far above any real equation; keeps error lines that quote it short */
  if (strlen(raw) > 256)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "equation of %zu characters (at most 256)",
                          strlen(raw));
  if (n_inputs > MAX_OPERANDS)
    return qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED, "%d operands (at most %d)", n_inputs,
                          MAX_OPERANDS);
  for (int k = 0; k < n_inputs; k++)
    if (!qh_kernel_check_dtype(node, inputs, n_inputs, k, error, QH_DTYPE_F32, 0))
      return FALSE;
  /* without spaces, which NumPy and ONNX Runtime ignore */
  GString *eqs = g_string_new(NULL);
  for (const char *c = raw; *c; c++)
    if (*c != ' ')
      g_string_append_c(eqs, *c);
  const char *eq = eqs->str, *arrow = strstr(eq, "->");
  size_t lhs_len = arrow ? (size_t)(arrow - eq) : strlen(eq);
  const char *why = NULL;
  gboolean ok = FALSE;
  memset(q, 0, sizeof *q);
  for (int l = 0; l < MAX_LABELS; l++)
    q->size[l] = -1;
  q->n_ops = n_inputs;
  int terms[MAX_OPERANDS][QH_MAX_RANK + 1], n_terms[MAX_OPERANDS];
  int count = 0;
  size_t start = 0;
  for (size_t i = 0; i <= lhs_len; i++) {
    if (i < lhs_len && eq[i] != ',')
      continue;
    if (count >= n_inputs) {
      why = "more terms than inputs";
      goto done;
    }
    if (!parse_term(eq + start, i - start, terms[count], &n_terms[count], &why))
      goto done;
    count++;
    start = i + 1;
  }
  if (count != n_inputs) {
    why = "fewer terms than inputs";
    goto done;
  }
  /* ellipsis rank: the most dimensions any operand's '...' covers */
  int ell_rank = 0, ell_of[MAX_OPERANDS];
  for (int k = 0; k < n_inputs; k++) {
    int letters = 0;
    gboolean has_ell = FALSE;
    for (int i = 0; i < n_terms[k]; i++)
      letters += terms[k][i] >= 0, has_ell |= terms[k][i] == -2;
    int rank = inputs[k]->shape.rank;
    if (has_ell ? rank < letters : rank != letters) {
      char *sh = qh_shape_to_string(&inputs[k]->shape);
      qh_kernel_fail(error, node, QH_ERROR_INVALID,
                     "equation '%s': term %d has %d letters%s for input %d of shape %s", eq, k, letters,
                     has_ell ? " and '...'" : "", k, sh);
      g_free(sh);
      goto done;
    }
    ell_of[k] = has_ell ? rank - letters : 0;
    ell_rank = MAX(ell_rank, ell_of[k]);
  }
  for (int k = 0; k < n_inputs; k++) {
    int64_t st[QH_MAX_RANK];
    qh_shape_strides(&inputs[k]->shape, st);
    int axis = 0;
    for (int i = 0; i < n_terms[k]; i++) {
      int n_ax = terms[k][i] == -2 ? ell_of[k] : 1;
      for (int j = 0; j < n_ax; j++, axis++) {
        int l = terms[k][i] == -2 ? N_LETTERS + ell_rank - ell_of[k] + j : terms[k][i];
        int64_t d = inputs[k]->shape.dims[axis];
        q->axis_label[k][axis] = l;
        gboolean ell = l >= N_LETTERS;
        if (q->size[l] < 0 || (ell && q->size[l] == 1)) {
          q->size[l] = d;
        } else if (q->size[l] != d && !(ell && d == 1)) {
          char buf[2] = {label_letter(l), 0};
          qh_kernel_fail(error, node, QH_ERROR_INVALID,
                         "equation '%s': %s%s has sizes %" G_GINT64_FORMAT " and %" G_GINT64_FORMAT, eq,
                         ell ? "an ellipsis dimension" : "label ", ell ? "" : buf, q->size[l], d);
          goto done;
        }
        /* a broadcast ellipsis dimension of 1 reads its one element throughout */
        if (!(ell && d == 1))
          q->stride[k][l] += st[axis];
        q->in_op[k][l] = TRUE;
      }
    }
    q->rank[k] = axis;
  }
  if (arrow != NULL) {
    int out[QH_MAX_RANK + 1], n_out;
    if (!parse_term(arrow + 2, strlen(arrow + 2), out, &n_out, &why))
      goto done;
    for (int i = 0; i < n_out; i++) {
      int n_ax = out[i] == -2 ? ell_rank : 1;
      for (int j = 0; j < n_ax; j++) {
        int l = out[i] == -2 ? N_LETTERS + j : out[i];
        if (q->size[l] < 0) {
          why = "an output letter that no input has";
          goto done;
        }
        if (q->in_out[l]) {
          why = "a letter repeated in the output";
          goto done;
        }
        if (q->n_out >= QH_MAX_RANK) {
          why = "an output of more dimensions than qhost supports";
          goto done;
        }
        q->in_out[l] = TRUE;
        q->out_label[q->n_out++] = l;
      }
    }
  } else { /* implicit: the ellipsis, then the letters used once, in ASCII order */
    int uses[N_LETTERS] = {0};
    for (int k = 0; k < n_inputs; k++)
      for (int i = 0; i < n_terms[k]; i++)
        if (terms[k][i] >= 0)
          uses[terms[k][i]]++;
    for (int j = 0; j < ell_rank; j++)
      q->in_out[N_LETTERS + j] = TRUE, q->out_label[q->n_out++] = N_LETTERS + j;
    for (int l = 0; l < N_LETTERS; l++)
      if (uses[l] == 1) {
        if (q->n_out >= QH_MAX_RANK) {
          why = "an output of more dimensions than qhost supports";
          goto done;
        }
        q->in_out[l] = TRUE, q->out_label[q->n_out++] = l;
      }
  }
  /* the work one evaluation costs, capped so that no equation can ask for years */
  int64_t work = 1;
  for (int l = 0; l < MAX_LABELS; l++)
    if (q->size[l] > 0) {
      if (work > MAX_WORK / q->size[l]) {
        qh_kernel_fail(error, node, QH_ERROR_LIMIT,
                       "equation '%s' on these shapes needs more than 2^40 multiply-adds", eq);
        goto done;
      }
      work *= q->size[l];
    }
  ok = TRUE;
done:
  if (why != NULL)
    bad_equation(node, eq, why, error);
  g_string_free(eqs, TRUE);
  return ok;
}

static gboolean infer(const QhNode *node, const QhTensor *const *inputs, int n_inputs, QhTensor *outputs,
                      int n_outputs, GError **error) {
  (void)n_outputs;
  Eq *q = g_new(Eq, 1);
  gboolean ok = parse(node, inputs, n_inputs, q, error);
  if (ok) {
    outputs[0].dtype = QH_DTYPE_F32;
    outputs[0].shape.rank = q->n_out;
    for (int i = 0; i < q->n_out; i++)
      outputs[0].shape.dims[i] = q->size[q->out_label[i]];
    outputs[0].data = NULL;
  }
  g_free(q);
  return ok;
}

/* ---- naive twin ---- */

static gboolean run_naive(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                          QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)ctx, (void)n_outputs;
  Eq *q = g_new(Eq, 1);
  if (!parse(node, inputs, n_inputs, q, error)) {
    g_free(q);
    return FALSE;
  }
  int sum_label[MAX_LABELS], n_sum = 0;
  int64_t n_combo = 1;
  for (int l = 0; l < MAX_LABELS; l++)
    if (q->size[l] >= 0 && !q->in_out[l])
      sum_label[n_sum++] = l, n_combo *= q->size[l];
  float *y = qh_f32(outputs[0]);
  int64_t n_out = qh_tensor_numel(outputs[0]), idx[MAX_LABELS] = {0};
  for (int64_t o = 0; o < n_out; o++) {
    int64_t rem = o;
    for (int i = q->n_out - 1; i >= 0; i--) {
      idx[q->out_label[i]] = rem % q->size[q->out_label[i]];
      rem /= q->size[q->out_label[i]];
    }
    double acc = 0;
    for (int64_t c = 0; c < n_combo; c++) {
      rem = c;
      for (int i = n_sum - 1; i >= 0; i--) {
        idx[sum_label[i]] = rem % q->size[sum_label[i]];
        rem /= q->size[sum_label[i]];
      }
      double prod = 1;
      for (int k = 0; k < q->n_ops; k++) {
        int64_t off = 0;
        for (int l = 0; l < MAX_LABELS; l++)
          if (q->in_op[k][l])
            off += idx[l] * q->stride[k][l];
        prod *= qh_f32(inputs[k])[off];
      }
      acc += prod;
    }
    y[o] = (float)acc;
  }
  g_free(q);
  return TRUE;
}

/* ---- fast path: a batched matrix product ---- */

/* dst[i] = src[offset of the i-th combination of labels, row-major], where each
 * label moves src by strides[label]. */
static void gather(const float *src, const int *labels, int n, const int64_t *sizes, const int64_t *strides,
                   float *dst) {
  int64_t total = 1, idx[MAX_LABELS] = {0}, off = 0;
  for (int i = 0; i < n; i++)
    total *= sizes[labels[i]];
  for (int64_t e = 0; e < total; e++) {
    dst[e] = src[off];
    for (int i = n - 1; i >= 0; i--) {
      int l = labels[i];
      off += strides[l];
      if (++idx[i] < sizes[l])
        break;
      off -= strides[l] * sizes[l];
      idx[i] = 0;
    }
  }
}

static gboolean run(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                    QhTensor *const *outputs, int n_outputs, GError **error) {
  Eq *q = g_new(Eq, 1);
  if (!parse(node, inputs, n_inputs, q, error)) {
    g_free(q);
    return FALSE;
  }
  /* classify the labels; anything but a batched matrix product goes the naive way */
  int batch[MAX_LABELS], m[MAX_LABELS], n[MAX_LABELS], kk[MAX_LABELS], nb = 0, nm = 0, nn = 0, nk = 0;
  gboolean matmul = q->n_ops == 2;
  int64_t B = 1, M = 1, N = 1, K = 1;
  for (int l = 0; matmul && l < MAX_LABELS; l++) {
    if (q->size[l] < 0)
      continue;
    gboolean a = q->in_op[0][l], b = q->in_op[1][l], o = q->in_out[l];
    if (a && b && o)
      batch[nb++] = l, B *= q->size[l];
    else if (a && o)
      m[nm++] = l, M *= q->size[l];
    else if (b && o)
      n[nn++] = l, N *= q->size[l];
    else if (a && b)
      kk[nk++] = l, K *= q->size[l];
    else
      matmul = FALSE; /* a label summed inside one operand */
  }
  if (!matmul || M > G_MAXINT || N > G_MAXINT || K > G_MAXINT) {
    g_free(q);
    return run_naive(ctx, node, inputs, n_inputs, outputs, n_outputs, error);
  }
  float *ap = g_try_new(float, MAX(B * M * K, 1)), *bp = g_try_new(float, MAX(B * K * N, 1)),
        *cp = g_try_new0(float, MAX(B * M * N, 1));
  gboolean ok = ap && bp && cp;
  if (!ok) {
    qh_kernel_fail(error, node, QH_ERROR_NOMEM, "out of memory packing the operands");
  } else {
    int la[MAX_LABELS], lb[MAX_LABELS], na = 0, nbl = 0;
    for (int i = 0; i < nb; i++)
      la[na++] = batch[i], lb[nbl++] = batch[i];
    for (int i = 0; i < nm; i++)
      la[na++] = m[i];
    for (int i = 0; i < nk; i++)
      la[na++] = kk[i], lb[nbl++] = kk[i];
    for (int i = 0; i < nn; i++)
      lb[nbl++] = n[i];
    gather(qh_f32(inputs[0]), la, na, q->size, q->stride[0], ap);
    gather(qh_f32(inputs[1]), lb, nbl, q->size, q->stride[1], bp);
    if (M > 0 && N > 0 && K > 0)
      for (int64_t b = 0; b < B; b++)
        qh_sgemm(ctx, CblasNoTrans, CblasNoTrans, (int)M, (int)N, (int)K, 1.0f, ap + b * M * K, (int)K,
                 bp + b * K * N, (int)N, 0.0f, cp + b * M * N, (int)N);
    /* C is [batch][M][N]: its stride for each label, then read in the output's order */
    int64_t cstr[MAX_LABELS] = {0}, st = 1;
    for (int i = nn - 1; i >= 0; i--)
      cstr[n[i]] = st, st *= q->size[n[i]];
    for (int i = nm - 1; i >= 0; i--)
      cstr[m[i]] = st, st *= q->size[m[i]];
    for (int i = nb - 1; i >= 0; i--)
      cstr[batch[i]] = st, st *= q->size[batch[i]];
    gather(cp, q->out_label, q->n_out, q->size, cstr, qh_f32(outputs[0]));
  }
  g_free(ap);
  g_free(bp);
  g_free(cp);
  g_free(q);
  return ok;
}

static int64_t macs(const QhNode *node, const QhTensor *const *inputs, int n_inputs, const QhTensor *outputs,
                    int n_outputs) {
  (void)outputs, (void)n_outputs;
  Eq *q = g_new(Eq, 1);
  int64_t work = 0;
  if (parse(node, inputs, n_inputs, q, NULL)) {
    work = 1;
    for (int l = 0; l < MAX_LABELS; l++)
      if (q->size[l] >= 0)
        work *= q->size[l];
  }
  g_free(q);
  return work;
}

const QhOpDef qh_ops_einsum[] = {
    {"Einsum", 1, MAX_OPERANDS, 1, 1, infer, run, run_naive, macs},
    {NULL},
};
