/* Dynamic quantization (`qhost quantize --dynamic`): PyTorch 1.13's quantize_dynamic with
 * its default qconfig_spec, written in ONNX Runtime's own dynamic format. Every Gemm or
 * MatMul whose weight is a constant 2-D float tensor (what an nn.Linear exports to) gets
 * its weight quantized once to int8, symmetric (default_dynamic_qconfig's MinMaxObserver,
 * or per output channel with per_channel_dynamic_qconfig's PerChannelMinMaxObserver), and
 * becomes DynamicQuantizeLinear (the activation to uint8 [0,255] on every call) ->
 * MatMulInteger -> Cast -> Mul by x_scale * w_scale (-> Add bias for a Gemm). No
 * calibration data: nothing is observed but the weights. Everything else stays float,
 * named in the report with the reason. docs/dynamic.md.
 *
 * Threading: one call per thread. Errors: GError, one line naming the model file; nothing
 * is written on error (the model and the report are written atomically at the end). */
#ifndef QH_QUANT_DYNAMIC_H
#define QH_QUANT_DYNAMIC_H

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  const char *model_path;
  const char *output_path;
  const char *backend;         /* "x86", "fbgemm", "qnnpack" or NULL (qnnpack's numerics) */
  gboolean per_channel;        /* one weight scale per output channel */
  const char *report_path;     /* JSON report file, or NULL */
  char **report_json_out;      /* receives the JSON report (g_free), or NULL */
  char **report_text_out;      /* receives the text report (g_free), or NULL */
} QhDynamicOptions;

/* Quantize dynamically and write the model (and report). */
gboolean qh_quantize_dynamic(const QhDynamicOptions *options, GError **error);

G_END_DECLS

#endif
