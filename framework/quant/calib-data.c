/* Reading calibration samples from .npy (streamed), a directory of .npy, or .npz, and
 * fitting each sample to the model's input shapes (see calib-data.h for the rules). */
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "io/npy.h"
#include "quant/calib-data.h"

typedef enum { SOURCE_NPY, SOURCE_DIR, SOURCE_NPZ } SourceKind;

struct QhCalibSource {
  SourceKind kind;
  char *path;
  const QhGraph *graph;
  int n_inputs;
  int64_t count;
  QhShape *shapes;       /* per input: the sample shape fed to the model */
  QhNpyReader *reader;   /* SOURCE_NPY */
  GPtrArray *files;      /* SOURCE_DIR: char* paths in name order */
  QhTensor **arrays;     /* SOURCE_NPZ: per input, the whole array */
};

static gboolean dims_fit(const QhValue *in, int offset, const QhShape *rows, int from) {
  for (int d = 0; d < in->shape.rank - offset; d++) {
    int64_t want = in->shape.dims[d + offset], have = rows->dims[d + from];
    if (want >= 0 && want != have)
      return FALSE;
  }
  return TRUE;
}

/* The sample shape for input `in` from an array of shape `file` whose first axis
 * indexes samples. */
static gboolean fit_shape(const QhCalibSource *s, const QhValue *in, const QhShape *file, QhShape *out,
                          GError **error) {
  char *fs = qh_shape_to_string(file), *is = qh_shape_to_string(&in->shape);
  gboolean ok = FALSE;
  if (in->shape.rank < 0) {
    /* no declared shape: one row with the batch axis kept */
    *out = *file;
    out->dims[0] = 1;
    ok = TRUE;
  } else if (file->rank == in->shape.rank && (in->shape.dims[0] == 1 || in->shape.dims[0] < 0) &&
             dims_fit(in, 1, file, 1)) {
    *out = *file;
    out->dims[0] = 1;
    ok = TRUE;
  } else if (file->rank == in->shape.rank + 1 && dims_fit(in, 0, file, 1)) {
    out->rank = in->shape.rank;
    for (int d = 0; d < out->rank; d++)
      out->dims[d] = file->dims[d + 1];
    ok = TRUE;
  }
  if (!ok)
    g_set_error(error, QH_ERROR, QH_ERROR_MISMATCH,
                "%s: an array of shape %s (samples along the first axis) does not fit input '%s' %s",
                s->path, fs, in->name, is);
  g_free(fs);
  g_free(is);
  return ok;
}

static gint compare_names(gconstpointer a, gconstpointer b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static gboolean open_dir(QhCalibSource *s, GError **error) {
  GDir *dir = g_dir_open(s->path, 0, error);
  if (dir == NULL)
    return FALSE;
  s->files = g_ptr_array_new_with_free_func(g_free);
  const char *name;
  while ((name = g_dir_read_name(dir)) != NULL)
    if (g_str_has_suffix(name, ".npy"))
      g_ptr_array_add(s->files, g_build_filename(s->path, name, NULL));
  g_dir_close(dir);
  g_ptr_array_sort(s->files, compare_names);
  s->count = s->files->len;
  if (s->count == 0)
    return TRUE;
  /* the first file fixes the sample shape: the model's input shape, batch axis optional */
  QhNpyReader *r = qh_npy_reader_open(s->files->pdata[0], error);
  if (r == NULL)
    return FALSE;
  QhShape file_shape = *qh_npy_reader_shape(r);
  qh_npy_reader_close(r);
  const QhValue *in = qh_graph_value(s->graph, g_array_index(s->graph->inputs, int, 0));
  /* the file is one sample: as rows of an array, [1, ...file], unless the file already
   * carries the model's batch axis of 1 */
  QhShape rows = {file_shape.rank + 1, {1}};
  memcpy(rows.dims + 1, file_shape.dims, sizeof(int64_t) * (size_t)file_shape.rank);
  if (file_shape.rank == in->shape.rank && file_shape.rank > 0 && file_shape.dims[0] == 1)
    rows = file_shape;
  return fit_shape(s, in, &rows, &s->shapes[0], error);
}

/* Take one array per graph input from members (QhNamedTensor*, matched by name;
 * samples along the first axis): the .npz source, and arrays given in memory. */
static gboolean take_arrays(QhCalibSource *s, GPtrArray *members, GError **error) {
  const QhGraph *graph = s->graph;
  const char *path = s->path;
  gboolean ok = TRUE;
  s->arrays = g_new0(QhTensor *, s->n_inputs);
  for (int i = 0; i < s->n_inputs && ok; i++) {
    const QhValue *in = qh_graph_value(graph, g_array_index(graph->inputs, int, i));
    for (guint k = 0; k < members->len; k++) {
      QhNamedTensor *nt = members->pdata[k];
      if (strcmp(nt->name, in->name) == 0 && s->arrays[i] == NULL) {
        s->arrays[i] = nt->tensor;
        nt->tensor = NULL;
      }
    }
    if (s->arrays[i] == NULL) {
      g_set_error(error, QH_ERROR, QH_ERROR_MISMATCH, "%s: no array named '%s' (the model's input)", path,
                  in->name);
      ok = FALSE;
    } else if (s->arrays[i]->shape.rank < 1) {
      g_set_error(error, QH_ERROR, QH_ERROR_MISMATCH, "%s: '%s' has no sample axis", path, in->name);
      ok = FALSE;
    } else {
      int64_t n = s->arrays[i]->shape.dims[0];
      if (i > 0 && n != s->count) {
        g_set_error(error, QH_ERROR, QH_ERROR_MISMATCH, "%s: '%s' has %" G_GINT64_FORMAT
                    " samples, the first input %" G_GINT64_FORMAT, path, in->name, n, s->count);
        ok = FALSE;
      }
      s->count = n;
      ok = ok && fit_shape(s, in, &s->arrays[i]->shape, &s->shapes[i], error);
    }
  }
  return ok;
}

QhCalibSource *qh_calib_open(const char *path, const QhGraph *graph, GError **error) {
  QhCalibSource *s = g_new0(QhCalibSource, 1);
  s->path = g_strdup(path);
  s->graph = graph;
  s->n_inputs = (int)graph->inputs->len;
  s->shapes = g_new0(QhShape, MAX(s->n_inputs, 1));
  gboolean ok = TRUE;
  if (s->n_inputs < 1) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s: the model has no inputs to calibrate with", path);
    ok = FALSE;
  } else if (g_file_test(path, G_FILE_TEST_IS_DIR)) {
    s->kind = SOURCE_DIR;
    if (s->n_inputs != 1) {
      g_set_error(error, QH_ERROR, QH_ERROR_MISMATCH,
                  "%s: a directory of .npy feeds one input; the model has %d (use an .npz)", path, s->n_inputs);
      ok = FALSE;
    } else {
      ok = open_dir(s, error);
    }
  } else if (g_str_has_suffix(path, ".npz")) {
    s->kind = SOURCE_NPZ;
    GPtrArray *members = qh_npz_read(path, error);
    ok = members != NULL && take_arrays(s, members, error);
    if (members)
      g_ptr_array_unref(members);
  } else {
    s->kind = SOURCE_NPY;
    if (s->n_inputs != 1) {
      g_set_error(error, QH_ERROR, QH_ERROR_MISMATCH,
                  "%s: a .npy feeds one input; the model has %d (use an .npz keyed by input name)", path,
                  s->n_inputs);
      ok = FALSE;
    } else if ((s->reader = qh_npy_reader_open(path, error)) == NULL) {
      ok = FALSE;
    } else {
      const QhShape *fs = qh_npy_reader_shape(s->reader);
      s->count = fs->rank >= 1 ? fs->dims[0] : 0;
      const QhValue *in = qh_graph_value(graph, g_array_index(graph->inputs, int, 0));
      ok = fs->rank >= 1 && fit_shape(s, in, fs, &s->shapes[0], error);
      if (fs->rank < 1)
        g_set_error(error, QH_ERROR, QH_ERROR_MISMATCH, "%s: a scalar has no sample axis", path);
    }
  }
  if (ok && s->count < 1) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s: no calibration samples", path);
    ok = FALSE;
  }
  if (!ok) {
    qh_calib_close(s);
    return NULL;
  }
  return s;
}

QhCalibSource *qh_calib_open_arrays(const char *label, const QhGraph *graph, const GPtrArray *arrays,
                                    GError **error) {
  QhCalibSource *s = g_new0(QhCalibSource, 1);
  s->kind = SOURCE_NPZ;
  s->path = g_strdup(label);
  s->graph = graph;
  s->n_inputs = (int)graph->inputs->len;
  s->shapes = g_new0(QhShape, MAX(s->n_inputs, 1));
  gboolean ok = TRUE;
  if (s->n_inputs < 1) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s: the model has no inputs to calibrate with", label);
    ok = FALSE;
  } else {
    /* take_arrays moves what it matches: hand it copies */
    GPtrArray *copies = g_ptr_array_new_with_free_func((GDestroyNotify)qh_named_tensor_free);
    for (guint k = 0; k < arrays->len && ok; k++) {
      const QhNamedTensor *nt = arrays->pdata[k];
      const char *name = nt->name;
      /* one unnamed array feeds a single-input model; anything else must be named */
      if (name == NULL && arrays->len == 1 && s->n_inputs == 1)
        name = qh_graph_value(graph, g_array_index(graph->inputs, int, 0))->name;
      if (name == NULL) {
        g_set_error(error, QH_ERROR, QH_ERROR_MISMATCH,
                    "%s: calibration array %u has no name: only one array for a single-input model may "
                    "go unnamed",
                    label, k);
        ok = FALSE;
        break;
      }
      QhNamedTensor *c = g_new0(QhNamedTensor, 1);
      c->name = g_strdup(name);
      g_ptr_array_add(copies, c);
      ok = (c->tensor = qh_tensor_copy(nt->tensor, error)) != NULL;
    }
    ok = ok && take_arrays(s, copies, error);
    g_ptr_array_unref(copies);
  }
  if (ok && s->count < 1) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s: no calibration samples", label);
    ok = FALSE;
  }
  if (!ok) {
    qh_calib_close(s);
    return NULL;
  }
  return s;
}

void qh_calib_close(QhCalibSource *s) {
  if (s == NULL)
    return;
  if (s->reader)
    qh_npy_reader_close(s->reader);
  if (s->files)
    g_ptr_array_unref(s->files);
  for (int i = 0; s->arrays && i < s->n_inputs; i++)
    qh_tensor_free(s->arrays[i]);
  g_free(s->arrays);
  g_free(s->shapes);
  g_free(s->path);
  g_free(s);
}

int64_t qh_calib_count(const QhCalibSource *s) { return s->count; }
const QhShape *qh_calib_shapes(const QhCalibSource *s) { return s->shapes; }

static gboolean check_finite(const QhCalibSource *s, const QhTensor *t, int64_t index, GError **error) {
  if (t->dtype != QH_DTYPE_F32)
    return TRUE;
  const float *d = t->data;
  int64_t n = qh_tensor_numel(t);
  for (int64_t i = 0; i < n; i++)
    if (!isfinite(d[i])) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s: sample %" G_GINT64_FORMAT " holds %s", s->path,
                  index, isnan(d[i]) ? "NaN" : "Inf");
      return FALSE;
    }
  return TRUE;
}

static QhTensor *row_of(const QhTensor *array, int64_t index, const QhShape *shape, GError **error) {
  QhTensor *t = qh_tensor_new(array->dtype, shape, error);
  if (t == NULL)
    return NULL;
  memcpy(t->data, (const char *)array->data + (size_t)index * t->nbytes, t->nbytes);
  return t;
}

QhTensor **qh_calib_read(QhCalibSource *s, int64_t index, GError **error) {
  QhTensor **sample = g_new0(QhTensor *, s->n_inputs + 1);
  gboolean ok = TRUE;
  for (int i = 0; i < s->n_inputs && ok; i++) {
    QhTensor *t = NULL;
    if (s->kind == SOURCE_NPY) {
      t = qh_npy_reader_read_rows(s->reader, index, 1, error);
    } else if (s->kind == SOURCE_DIR) {
      t = qh_npy_read(s->files->pdata[index], error);
      if (t && qh_tensor_numel(t) != 0) {
        int64_t want = 1;
        for (int d = 0; d < s->shapes[0].rank; d++)
          want *= s->shapes[0].dims[d];
        if (qh_tensor_numel(t) != want) {
          char *ws = qh_shape_to_string(&s->shapes[0]), *gs = qh_shape_to_string(&t->shape);
          g_set_error(error, QH_ERROR, QH_ERROR_MISMATCH, "%s: shape %s, the first sample was %s",
                      (const char *)s->files->pdata[index], gs, ws);
          g_free(ws);
          g_free(gs);
          qh_tensor_free(t);
          t = NULL;
        }
      }
    } else {
      t = row_of(s->arrays[i], index, &s->shapes[i], error);
    }
    if (t == NULL) {
      ok = FALSE;
      break;
    }
    t->shape = s->shapes[i]; /* same element count: rows i:i+1, or the row without its batch axis */
    sample[i] = t;
    ok = check_finite(s, t, index, error);
  }
  if (!ok) {
    qh_calib_free_sample(s, sample);
    return NULL;
  }
  return sample;
}

void qh_calib_free_sample(QhCalibSource *s, QhTensor **sample) {
  if (sample == NULL)
    return;
  for (int i = 0; i < s->n_inputs; i++)
    qh_tensor_free(sample[i]);
  g_free(sample);
}
