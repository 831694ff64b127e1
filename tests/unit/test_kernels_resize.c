/* Unit tests of the Resize kernel: every nearest mode and coordinate transformation
 * against expectations from numpy and PyTorch, nearest on uint8, the fast paths
 * against the naive twin, and the unsupported modes. */
#include "kernel_case.h"

/* ---- Resize ---- */

/* Expected outputs from an ONNX-formula reference in numpy, itself checked against
 * PyTorch where PyTorch has the mode (half_pixel linear == bilinear with
 * align_corners=False, align_corners linear == align_corners=True, asymmetric+floor
 * == 'nearest', tf_half_pixel_for_nearest+floor == 'nearest-exact'). Case U: X1
 * (1x1x2x3) with scales [1, 1, 2, 2]; D: X2 (1x1x4x5) with sizes [1, 1, 3, 2];
 * P: X2 with sizes [1, 1, 1, 3]. */
static const float X1[] = {1, 4, 2, 7, 3, 9};
static const float X2[] = {0, 7, 3, 10, 6, 2, 9, 5, 1, 8, 4, 0, 7, 3, 10, 6, 2, 9, 5, 1};

static const struct {
  const char *mode, *coord, *nearest;
  char input;
  int n;
  float want[24];
} resize_cases[] = {
    {"linear", "half_pixel", "round_prefer_floor", 'U', 24, {1.0f, 1.75f, 3.25f, 3.5f, 2.5f, 2.0f, 2.5f, 2.8125f, 3.4375f, 3.75f, 3.75f, 3.75f, 5.5f, 4.9375f, 3.8125f, 4.25f, 6.25f, 7.25f, 7.0f, 6.0f, 4.0f, 4.5f, 7.5f, 9.0f}},
    {"linear", "half_pixel", "round_prefer_floor", 'D', 6, {5.5833333f, 7.9583333f, 4.125f, 3.75f, 2.6666667f, 4.125f}},
    {"linear", "half_pixel", "round_prefer_floor", 'P', 3, {3.5f, 6.0f, 6.6666667f}},
    {"linear", "asymmetric", "round_prefer_floor", 'U', 24, {1.0f, 2.5f, 4.0f, 3.0f, 2.0f, 2.0f, 4.0f, 3.75f, 3.5f, 4.5f, 5.5f, 5.5f, 7.0f, 5.0f, 3.0f, 6.0f, 9.0f, 9.0f, 7.0f, 5.0f, 3.0f, 6.0f, 9.0f, 9.0f}},
    {"linear", "asymmetric", "round_prefer_floor", 'D', 6, {0.0f, 6.5f, 2.6666667f, 3.6666667f, 5.3333333f, 6.3333333f}},
    {"linear", "asymmetric", "round_prefer_floor", 'P', 3, {0.0f, 4.3333333f, 8.6666667f}},
    {"linear", "align_corners", "round_prefer_floor", 'U', 24, {1.0f, 2.2f, 3.4f, 3.6f, 2.8f, 2.0f, 3.0f, 3.2666667f, 3.5333333f, 3.8f, 4.0666667f, 4.3333333f, 5.0f, 4.3333333f, 3.6666667f, 4.0f, 5.3333333f, 6.6666667f, 7.0f, 5.4f, 3.8f, 4.2f, 6.6f, 9.0f}},
    {"linear", "align_corners", "round_prefer_floor", 'D', 6, {0.0f, 6.0f, 3.0f, 9.0f, 6.0f, 1.0f}},
    {"linear", "align_corners", "round_prefer_floor", 'P', 3, {0.0f, 3.0f, 6.0f}},
    {"linear", "pytorch_half_pixel", "round_prefer_floor", 'U', 24, {1.0f, 1.75f, 3.25f, 3.5f, 2.5f, 2.0f, 2.5f, 2.8125f, 3.4375f, 3.75f, 3.75f, 3.75f, 5.5f, 4.9375f, 3.8125f, 4.25f, 6.25f, 7.25f, 7.0f, 6.0f, 4.0f, 4.5f, 7.5f, 9.0f}},
    {"linear", "pytorch_half_pixel", "round_prefer_floor", 'D', 6, {5.5833333f, 7.9583333f, 4.125f, 3.75f, 2.6666667f, 4.125f}},
    {"linear", "pytorch_half_pixel", "round_prefer_floor", 'P', 3, {2.3333333f, 3.0f, 7.3333333f}},
    {"linear", "tf_half_pixel_for_nearest", "round_prefer_floor", 'U', 24, {2.8125f, 3.4375f, 3.75f, 3.75f, 3.75f, 3.75f, 4.9375f, 3.8125f, 4.25f, 6.25f, 7.25f, 7.25f, 6.0f, 4.0f, 4.5f, 7.5f, 9.0f, 9.0f, 6.0f, 4.0f, 4.5f, 7.5f, 9.0f, 9.0f}},
    {"linear", "tf_half_pixel_for_nearest", "round_prefer_floor", 'D', 6, {7.3333333f, 6.5f, 1.75f, 8.25f, 3.75f, 2.0f}},
    {"linear", "tf_half_pixel_for_nearest", "round_prefer_floor", 'P', 3, {0.66666667f, 5.0f, 10.0f}},
    {"nearest", "half_pixel", "round_prefer_floor", 'U', 24, {1.0f, 1.0f, 4.0f, 4.0f, 2.0f, 2.0f, 1.0f, 1.0f, 4.0f, 4.0f, 2.0f, 2.0f, 7.0f, 7.0f, 3.0f, 3.0f, 9.0f, 9.0f, 7.0f, 7.0f, 3.0f, 3.0f, 9.0f, 9.0f}},
    {"nearest", "half_pixel", "round_prefer_floor", 'D', 6, {7.0f, 10.0f, 9.0f, 1.0f, 2.0f, 5.0f}},
    {"nearest", "asymmetric", "round_prefer_floor", 'U', 24, {1.0f, 1.0f, 4.0f, 4.0f, 2.0f, 2.0f, 1.0f, 1.0f, 4.0f, 4.0f, 2.0f, 2.0f, 7.0f, 7.0f, 3.0f, 3.0f, 9.0f, 9.0f, 7.0f, 7.0f, 3.0f, 3.0f, 9.0f, 9.0f}},
    {"nearest", "asymmetric", "round_prefer_floor", 'D', 6, {0.0f, 3.0f, 2.0f, 5.0f, 6.0f, 9.0f}},
    {"nearest", "align_corners", "round_prefer_floor", 'U', 24, {1.0f, 1.0f, 4.0f, 4.0f, 2.0f, 2.0f, 1.0f, 1.0f, 4.0f, 4.0f, 2.0f, 2.0f, 7.0f, 7.0f, 3.0f, 3.0f, 9.0f, 9.0f, 7.0f, 7.0f, 3.0f, 3.0f, 9.0f, 9.0f}},
    {"nearest", "align_corners", "round_prefer_floor", 'D', 6, {0.0f, 6.0f, 2.0f, 8.0f, 6.0f, 1.0f}},
    {"nearest", "pytorch_half_pixel", "round_prefer_floor", 'U', 24, {1.0f, 1.0f, 4.0f, 4.0f, 2.0f, 2.0f, 1.0f, 1.0f, 4.0f, 4.0f, 2.0f, 2.0f, 7.0f, 7.0f, 3.0f, 3.0f, 9.0f, 9.0f, 7.0f, 7.0f, 3.0f, 3.0f, 9.0f, 9.0f}},
    {"nearest", "pytorch_half_pixel", "round_prefer_floor", 'D', 6, {7.0f, 10.0f, 9.0f, 1.0f, 2.0f, 5.0f}},
    {"nearest", "tf_half_pixel_for_nearest", "round_prefer_floor", 'U', 24, {1.0f, 4.0f, 4.0f, 2.0f, 2.0f, 2.0f, 7.0f, 3.0f, 3.0f, 9.0f, 9.0f, 9.0f, 7.0f, 3.0f, 3.0f, 9.0f, 9.0f, 9.0f, 7.0f, 3.0f, 3.0f, 9.0f, 9.0f, 9.0f}},
    {"nearest", "tf_half_pixel_for_nearest", "round_prefer_floor", 'D', 6, {9.0f, 8.0f, 0.0f, 10.0f, 2.0f, 1.0f}},
    {"nearest", "half_pixel", "round_prefer_ceil", 'U', 24, {1.0f, 1.0f, 4.0f, 4.0f, 2.0f, 2.0f, 1.0f, 1.0f, 4.0f, 4.0f, 2.0f, 2.0f, 7.0f, 7.0f, 3.0f, 3.0f, 9.0f, 9.0f, 7.0f, 7.0f, 3.0f, 3.0f, 9.0f, 9.0f}},
    {"nearest", "half_pixel", "round_prefer_ceil", 'D', 6, {7.0f, 10.0f, 0.0f, 3.0f, 2.0f, 5.0f}},
    {"nearest", "asymmetric", "round_prefer_ceil", 'U', 24, {1.0f, 4.0f, 4.0f, 2.0f, 2.0f, 2.0f, 7.0f, 3.0f, 3.0f, 9.0f, 9.0f, 9.0f, 7.0f, 3.0f, 3.0f, 9.0f, 9.0f, 9.0f, 7.0f, 3.0f, 3.0f, 9.0f, 9.0f, 9.0f}},
    {"nearest", "asymmetric", "round_prefer_ceil", 'D', 6, {0.0f, 10.0f, 2.0f, 1.0f, 6.0f, 5.0f}},
    {"nearest", "align_corners", "round_prefer_ceil", 'U', 24, {1.0f, 1.0f, 4.0f, 4.0f, 2.0f, 2.0f, 1.0f, 1.0f, 4.0f, 4.0f, 2.0f, 2.0f, 7.0f, 7.0f, 3.0f, 3.0f, 9.0f, 9.0f, 7.0f, 7.0f, 3.0f, 3.0f, 9.0f, 9.0f}},
    {"nearest", "align_corners", "round_prefer_ceil", 'D', 6, {0.0f, 6.0f, 4.0f, 10.0f, 6.0f, 1.0f}},
    {"nearest", "pytorch_half_pixel", "round_prefer_ceil", 'U', 24, {1.0f, 1.0f, 4.0f, 4.0f, 2.0f, 2.0f, 1.0f, 1.0f, 4.0f, 4.0f, 2.0f, 2.0f, 7.0f, 7.0f, 3.0f, 3.0f, 9.0f, 9.0f, 7.0f, 7.0f, 3.0f, 3.0f, 9.0f, 9.0f}},
    {"nearest", "pytorch_half_pixel", "round_prefer_ceil", 'D', 6, {7.0f, 10.0f, 0.0f, 3.0f, 2.0f, 5.0f}},
    {"nearest", "tf_half_pixel_for_nearest", "round_prefer_ceil", 'U', 24, {1.0f, 4.0f, 4.0f, 2.0f, 2.0f, 2.0f, 7.0f, 3.0f, 3.0f, 9.0f, 9.0f, 9.0f, 7.0f, 3.0f, 3.0f, 9.0f, 9.0f, 9.0f, 7.0f, 3.0f, 3.0f, 9.0f, 9.0f, 9.0f}},
    {"nearest", "tf_half_pixel_for_nearest", "round_prefer_ceil", 'D', 6, {9.0f, 8.0f, 0.0f, 10.0f, 2.0f, 1.0f}},
    {"nearest", "half_pixel", "floor", 'U', 24, {1.0f, 1.0f, 1.0f, 4.0f, 4.0f, 2.0f, 1.0f, 1.0f, 1.0f, 4.0f, 4.0f, 2.0f, 1.0f, 1.0f, 1.0f, 4.0f, 4.0f, 2.0f, 7.0f, 7.0f, 7.0f, 3.0f, 3.0f, 9.0f}},
    {"nearest", "half_pixel", "floor", 'D', 6, {0.0f, 10.0f, 2.0f, 1.0f, 4.0f, 3.0f}},
    {"nearest", "asymmetric", "floor", 'U', 24, {1.0f, 1.0f, 4.0f, 4.0f, 2.0f, 2.0f, 1.0f, 1.0f, 4.0f, 4.0f, 2.0f, 2.0f, 7.0f, 7.0f, 3.0f, 3.0f, 9.0f, 9.0f, 7.0f, 7.0f, 3.0f, 3.0f, 9.0f, 9.0f}},
    {"nearest", "asymmetric", "floor", 'D', 6, {0.0f, 3.0f, 2.0f, 5.0f, 4.0f, 7.0f}},
    {"nearest", "align_corners", "floor", 'U', 24, {1.0f, 1.0f, 1.0f, 4.0f, 4.0f, 2.0f, 1.0f, 1.0f, 1.0f, 4.0f, 4.0f, 2.0f, 1.0f, 1.0f, 1.0f, 4.0f, 4.0f, 2.0f, 7.0f, 7.0f, 7.0f, 3.0f, 3.0f, 9.0f}},
    {"nearest", "align_corners", "floor", 'D', 6, {0.0f, 6.0f, 2.0f, 8.0f, 6.0f, 1.0f}},
    {"nearest", "pytorch_half_pixel", "floor", 'U', 24, {1.0f, 1.0f, 1.0f, 4.0f, 4.0f, 2.0f, 1.0f, 1.0f, 1.0f, 4.0f, 4.0f, 2.0f, 1.0f, 1.0f, 1.0f, 4.0f, 4.0f, 2.0f, 7.0f, 7.0f, 7.0f, 3.0f, 3.0f, 9.0f}},
    {"nearest", "pytorch_half_pixel", "floor", 'D', 6, {0.0f, 10.0f, 2.0f, 1.0f, 4.0f, 3.0f}},
    {"nearest", "tf_half_pixel_for_nearest", "floor", 'U', 24, {1.0f, 1.0f, 4.0f, 4.0f, 2.0f, 2.0f, 1.0f, 1.0f, 4.0f, 4.0f, 2.0f, 2.0f, 7.0f, 7.0f, 3.0f, 3.0f, 9.0f, 9.0f, 7.0f, 7.0f, 3.0f, 3.0f, 9.0f, 9.0f}},
    {"nearest", "tf_half_pixel_for_nearest", "floor", 'D', 6, {7.0f, 10.0f, 0.0f, 3.0f, 2.0f, 5.0f}},
    {"nearest", "half_pixel", "ceil", 'U', 24, {1.0f, 4.0f, 4.0f, 2.0f, 2.0f, 2.0f, 7.0f, 3.0f, 3.0f, 9.0f, 9.0f, 9.0f, 7.0f, 3.0f, 3.0f, 9.0f, 9.0f, 9.0f, 7.0f, 3.0f, 3.0f, 9.0f, 9.0f, 9.0f}},
    {"nearest", "half_pixel", "ceil", 'D', 6, {9.0f, 8.0f, 0.0f, 10.0f, 2.0f, 1.0f}},
    {"nearest", "asymmetric", "ceil", 'U', 24, {1.0f, 4.0f, 4.0f, 2.0f, 2.0f, 2.0f, 7.0f, 3.0f, 3.0f, 9.0f, 9.0f, 9.0f, 7.0f, 3.0f, 3.0f, 9.0f, 9.0f, 9.0f, 7.0f, 3.0f, 3.0f, 9.0f, 9.0f, 9.0f}},
    {"nearest", "asymmetric", "ceil", 'D', 6, {0.0f, 10.0f, 4.0f, 3.0f, 6.0f, 5.0f}},
    {"nearest", "align_corners", "ceil", 'U', 24, {1.0f, 4.0f, 4.0f, 2.0f, 2.0f, 2.0f, 7.0f, 3.0f, 3.0f, 9.0f, 9.0f, 9.0f, 7.0f, 3.0f, 3.0f, 9.0f, 9.0f, 9.0f, 7.0f, 3.0f, 3.0f, 9.0f, 9.0f, 9.0f}},
    {"nearest", "align_corners", "ceil", 'D', 6, {0.0f, 6.0f, 4.0f, 10.0f, 6.0f, 1.0f}},
    {"nearest", "pytorch_half_pixel", "ceil", 'U', 24, {1.0f, 4.0f, 4.0f, 2.0f, 2.0f, 2.0f, 7.0f, 3.0f, 3.0f, 9.0f, 9.0f, 9.0f, 7.0f, 3.0f, 3.0f, 9.0f, 9.0f, 9.0f, 7.0f, 3.0f, 3.0f, 9.0f, 9.0f, 9.0f}},
    {"nearest", "pytorch_half_pixel", "ceil", 'D', 6, {9.0f, 8.0f, 0.0f, 10.0f, 2.0f, 1.0f}},
    {"nearest", "tf_half_pixel_for_nearest", "ceil", 'U', 24, {3.0f, 3.0f, 9.0f, 9.0f, 9.0f, 9.0f, 3.0f, 3.0f, 9.0f, 9.0f, 9.0f, 9.0f, 3.0f, 3.0f, 9.0f, 9.0f, 9.0f, 9.0f, 3.0f, 3.0f, 9.0f, 9.0f, 9.0f, 9.0f}},
    {"nearest", "tf_half_pixel_for_nearest", "ceil", 'D', 6, {5.0f, 8.0f, 7.0f, 10.0f, 9.0f, 1.0f}},
};

static Case *resize_case(char which, const char *mode, const char *coord, const char *nearest) {
  Case *c = case_new("Resize", 4, 1);
  if (which == 'U') {
    c->in[0] = mk(QH_DTYPE_F32, 4, DIMS(1, 1, 2, 3), X1);
    c->in[2] = mk(QH_DTYPE_F32, 1, DIMS(4), F32V(1, 1, 2, 2));
    c->in[3] = mk(QH_DTYPE_S64, 1, DIMS(0), NULL); /* present but empty */
  } else {
    c->in[0] = mk(QH_DTYPE_F32, 4, DIMS(1, 1, 4, 5), X2);
    c->in[3] = which == 'D' ? I64(1, 1, 3, 2) : I64(1, 1, 1, 3);
  }
  c->in[1] = mk(QH_DTYPE_F32, 1, DIMS(0), NULL); /* roi: ignored */
  c->dynamic[1] = TRUE;
  qh_node_set_attr_string(c->node, "mode", mode);
  qh_node_set_attr_string(c->node, "coordinate_transformation_mode", coord);
  qh_node_set_attr_string(c->node, "nearest_mode", nearest);
  return c;
}

static void test_resize_values(void) {
  for (size_t i = 0; i < G_N_ELEMENTS(resize_cases); i++) {
    Case *c = resize_case(resize_cases[i].input, resize_cases[i].mode, resize_cases[i].coord,
                          resize_cases[i].nearest);
    const int64_t *dims = resize_cases[i].input == 'U'   ? DIMS(1, 1, 4, 6)
                          : resize_cases[i].input == 'D' ? DIMS(1, 1, 3, 2)
                                                         : DIMS(1, 1, 1, 3);
    if (g_test_verbose())
      g_test_message("%s %s %s %c", resize_cases[i].mode, resize_cases[i].coord,
                     resize_cases[i].nearest, resize_cases[i].input);
    check_both_f32(c, 4, dims, resize_cases[i].want, 1e-5f);
    case_free(c);
  }
}

/* Nearest copies elements of any type: uint8 gives the float result's values. */
static void test_resize_nearest_u8(void) {
  Case *c = resize_case('D', "nearest", "half_pixel", "round_prefer_floor");
  QhTensor *f = c->in[0];
  c->in[0] = mk(QH_DTYPE_U8, 4, DIMS(1, 1, 4, 5), NULL);
  for (int i = 0; i < 20; i++)
    ((guint8 *)c->in[0]->data)[i] = (guint8)X2[i];
  qh_tensor_free(f);
  for (int naive = 0; naive < 2; naive++) {
    run_ok(c, naive);
    check_shape(c->out[0], 4, DIMS(1, 1, 3, 2));
    g_assert_cmpmem(c->out[0]->data, 6, ((const guint8[]){7, 10, 9, 1, 2, 5}), 6);
  }
  case_free(c);
}

/* Interpolating leading axes and odd ranks take the generic fast loop. */
static void test_resize_fast_vs_naive(void) {
  static const struct {
    int rank;
    int64_t dims[4];
    float scales[4];
  } cases[] = {
      {3, {2, 3, 4}, {2.0f, 1.0f, 1.5f}},   {1, {5}, {1.7f}},
      {4, {2, 3, 9, 7}, {1, 1, 0.5f, 2.3f}}, {2, {6, 5}, {0.6f, 3}},
      {4, {1, 2, 5, 4}, {1, 2.5f, 1, 1.5f}},
  };
  static const char *coords[] = {"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel",
                                 "tf_half_pixel_for_nearest"};
  GRand *rng = g_rand_new_with_seed(11);
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++)
    for (size_t m = 0; m < 2 * G_N_ELEMENTS(coords); m++) {
      Case *c = case_new("Resize", 3, 1);
      c->in[0] = mk(QH_DTYPE_F32, cases[i].rank, cases[i].dims, NULL);
      for (int64_t k = 0; k < qh_tensor_numel(c->in[0]); k++)
        qh_f32(c->in[0])[k] = (float)g_rand_double_range(rng, -4, 4);
      c->in[2] = mk(QH_DTYPE_F32, 1, DIMS(cases[i].rank), cases[i].scales);
      qh_node_set_attr_string(c->node, "mode", m % 2 ? "linear" : "nearest");
      qh_node_set_attr_string(c->node, "coordinate_transformation_mode", coords[m / 2]);
      run_ok(c, TRUE);
      QhTensor *slow = qh_tensor_copy(c->out[0], NULL);
      run_ok(c, FALSE);
      check_f32(c->out[0], slow->shape.rank, slow->shape.dims, qh_f32(slow), 1e-5f);
      qh_tensor_free(slow);
      case_free(c);
    }
  g_rand_free(rng);
}

static void test_resize_errors(void) {
  Case *c = resize_case('U', "cubic", "half_pixel", "round_prefer_floor");
  expect_error(c, QH_ERROR_UNSUPPORTED, "mode 'cubic' is not supported");
  qh_node_set_attr_string(c->node, "mode", "linear");
  qh_node_set_attr_string(c->node, "coordinate_transformation_mode", "tf_crop_and_resize");
  expect_error(c, QH_ERROR_UNSUPPORTED, "'tf_crop_and_resize' is not supported");
  qh_node_set_attr_string(c->node, "coordinate_transformation_mode", "half_pixel");
  qh_tensor_free(c->in[3]);
  c->in[3] = I64(1, 1, 4, 6);
  expect_error(c, QH_ERROR_INVALID, "exactly one of 'scales' and 'sizes'");
  qh_tensor_free(c->in[3]);
  c->in[3] = NULL;
  c->dynamic[2] = TRUE;
  expect_error(c, QH_ERROR_UNSUPPORTED, "input 'scales' must be a constant");
  c->dynamic[2] = FALSE;
  qh_f32(c->in[2])[1] = -1;
  expect_error(c, QH_ERROR_INVALID, "scale -1 on axis 1 is not positive");
  qh_tensor_free(c->in[0]);
  c->in[0] = mk(QH_DTYPE_U8, 4, DIMS(1, 1, 2, 3), NULL);
  expect_error(c, QH_ERROR_UNSUPPORTED, "linear mode supports float32 only");
  case_free(c);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/kernels/resize/values", test_resize_values);
  g_test_add_func("/kernels/resize/nearest_u8", test_resize_nearest_u8);
  g_test_add_func("/kernels/resize/fast_vs_naive", test_resize_fast_vs_naive);
  g_test_add_func("/kernels/resize/errors", test_resize_errors);
  return g_test_run();
}
