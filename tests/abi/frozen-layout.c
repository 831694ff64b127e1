/* The ABI 1.0 memory layout, frozen: every number below is the x86-64 (LP64, System V)
 * layout that ABI 1.0 shipped, written as a literal so that no header edit can move
 * it silently. THESE NUMBERS MUST NEVER CHANGE. A later minor adds members only at
 * the end of a struct: then sizeof grows and the new member gets its own assertion
 * under an "ABI 1.N" heading, while every 1.0 assertion stays as it is (ONNX Runtime
 * keeps the same `offsetof(last member)` record for each closed version of OrtApi).
 *
 * The file is compiled twice: against sdk/include (the SDK as it is now) and against
 * tests/abi/sdk-snapshots/1.0 (the SDK as 1.0 shipped it), so both must agree. It is a
 * compile-time test; running it only reports the outcome (77, "skipped", on a target
 * whose layout these literals do not describe). */
#include <qhost/qhost-plugin.h>
#include <stdio.h>

#if defined(__x86_64__) && defined(__LP64__)

/* The offset of `member` and the size of `type`, in bytes. */
#define AT(type, member, offset) \
  _Static_assert(offsetof(type, member) == (offset), #type "." #member " moved")
#define SIZE_1_0(type, size)                                                                 \
  _Static_assert(sizeof(type) >= (size), #type " shrank below its ABI 1.0 size");            \
  _Static_assert(QH_ABI_MINOR > 0 || sizeof(type) == (size), #type " changed size in ABI 1.0")

/* ---- the frozen bases: identical in every ABI major, not only in 1.x ---- */
AT(QhHostApi, abi_version, 0);
AT(QhHostApi, struct_size, 4);
AT(QhHostApi, status_new, 8);
AT(QhHostApi, status_free, 16);
AT(QhHostApi, log, 24);
AT(QhPluginDesc, abi_version, 0);
AT(QhPluginDesc, struct_size, 4);

/* ---- versions and the entry point ---- */
_Static_assert(QH_ABI_MAJOR == 1, "this file describes ABI 1.x");
_Static_assert(QH_ABI_VERSION_MAJOR(0x00010002u) == 1 && QH_ABI_VERSION_MINOR(0x00010002u) == 2,
               "abi_version packs major << 16 | minor");

/* ---- ABI 1.0: the closed layout of every struct (last member and size) ---- */

/* The host table: 63 function pointers after the header; parallel_for is the last
 * member of closed minor 1.0. */
AT(QhHostApi, status_code, 32);
AT(QhHostApi, parallel_for, 504);
SIZE_1_0(QhHostApi, 512);

/* ---- ABI 1.1 (open): the host table grew by two functions, appended right where
 * 1.0 ended; compiled against the 1.0 snapshot this section is absent ---- */
#if QH_ABI_MINOR >= 1
AT(QhHostApi, artifact_write_model, 512);
AT(QhHostApi, artifact_source_digest, 520);
/* 1.1 closed at 528 bytes: the 1.2 section below puts 1.2's first member there */
_Static_assert(sizeof(QhHostApi) >= 528, "QhHostApi shrank below its ABI 1.1 size");
_Static_assert(QH_MODEL_STRIP_QDQ == 0x1u, "artifact_write_model flags");
#endif

/* ---- ABI 1.2 (open): shapes at accept, passes, plugin data; each appended right where
 * 1.1 ended. Active once QH_ABI_MINOR says 1.2. ---- */
#if QH_ABI_MINOR >= 2
AT(QhHostApi, constant_set, 528);
AT(QhHostApi, metadata_set, 536);
AT(QhHostApi, metadata_get, 544);
AT(QhPluginDesc, passes, 144);
AT(QhNodeUnit, input_tensors, 88);
AT(QhNodeUnit, output_tensors, 96);
AT(QhPassOps, post_calibration, 8);
AT(QhPassOps, post_convert, 16);
AT(QhDTypeConfig, bias_derivation, 56);
AT(QhBackendPatternConfig, shared_inputs_mask, 104);
/* partitions: appended after passes */
AT(QhPluginDesc, partitions, 152);
AT(QhPartitionClaim, name, 8);
AT(QhPartitionClaim, nodes, 16);
AT(QhPartitionClaim, n_nodes, 24);
AT(QhPartition, name, 8);
AT(QhPartition, index, 16);
AT(QhPartition, nodes, 24);
AT(QhPartition, units, 32);
AT(QhPartition, n_nodes, 40);
AT(QhPartition, inputs, 48);
AT(QhPartition, input_tensors, 56);
AT(QhPartition, n_inputs, 64);
AT(QhPartition, outputs, 72);
AT(QhPartition, output_tensors, 80);
AT(QhPartition, n_outputs, 88);
AT(QhPartitionOps, id, 8);
AT(QhPartitionOps, io_layout, 16);
AT(QhPartitionOps, flags, 20);
AT(QhPartitionOps, claim, 24);
AT(QhPartitionOps, compile, 32);
AT(QhPartitionOps, reshape, 40);
AT(QhPartitionOps, run, 48);
AT(QhPartitionOps, destroy, 56);
#endif

/* The descriptor: every member, since the host reads each one only when struct_size
 * covers it. */
AT(QhPluginDesc, name, 8);
AT(QhPluginDesc, version, 16);
AT(QhPluginDesc, description, 24);
AT(QhPluginDesc, flags, 32);
AT(QhPluginDesc, options, 40);
AT(QhPluginDesc, n_options, 48);
AT(QhPluginDesc, instance_create, 56);
AT(QhPluginDesc, instance_destroy, 64);
AT(QhPluginDesc, transform, 72);
AT(QhPluginDesc, backend_config, 80);
AT(QhPluginDesc, annotate, 88);
AT(QhPluginDesc, observers, 96);
AT(QhPluginDesc, n_observers, 104);
AT(QhPluginDesc, refine, 112);
AT(QhPluginDesc, reference_numerics, 120);
AT(QhPluginDesc, lowering, 128);
AT(QhPluginDesc, deploy, 136);
SIZE_1_0(QhPluginDesc, 144);
_Static_assert(QH_PLUGIN_DESC_MIN_SIZE == 36, "the smallest descriptor a host accepts");

AT(QhInstanceInfo, plugin_path, 16);
SIZE_1_0(QhInstanceInfo, 24);
AT(QhTransformOps, transform_for_annotation, 8);
SIZE_1_0(QhTransformOps, 16);
AT(QhAnnotateOps, validate, 16);
SIZE_1_0(QhAnnotateOps, 24);
AT(QhObserverOps, destroy, 80);
SIZE_1_0(QhObserverOps, 88);
AT(QhRefineOps, refine, 8);
SIZE_1_0(QhRefineOps, 16);
AT(QhReferenceNumericsOps, fake_quantize, 16);
SIZE_1_0(QhReferenceNumericsOps, 24);
AT(QhNodeUnit, output_qparams, 80);
SIZE_1_0(QhNodeUnit, 88);
AT(QhKernelOps, reorder_from_nchw, 72);
SIZE_1_0(QhKernelOps, 80);
AT(QhLoweringPattern, accept, 72);
SIZE_1_0(QhLoweringPattern, 80);
AT(QhLoweringOps, n_patterns, 16);
SIZE_1_0(QhLoweringOps, 24);
AT(QhDeployOps, deploy, 16);
SIZE_1_0(QhDeployOps, 24);

AT(QhQParams, zero_point, 56);
SIZE_1_0(QhQParams, 64);
AT(QhQuantSpec, shared_with, 72);
AT(QhQuantSpec, derive_user_data, 112);
SIZE_1_0(QhQuantSpec, 120);
AT(QhTensorView, dims, 24);
AT(QhTensorView, qparams, 104);
SIZE_1_0(QhTensorView, 112);
AT(QhOptionDecl, max, 56);
SIZE_1_0(QhOptionDecl, 64);

AT(QhDTypeConstraint, zero_point_exact, 36);
SIZE_1_0(QhDTypeConstraint, 40);
AT(QhDTypeConfig, bias, 48);
SIZE_1_0(QhDTypeConfig, 56);
AT(QhBackendPatternConfig, fused_name, 96);
SIZE_1_0(QhBackendPatternConfig, 104);
AT(QhQConfigEntry, weight, 32);
SIZE_1_0(QhQConfigEntry, 40);
AT(QhBackendConfig, n_default_qconfig, 48);
SIZE_1_0(QhBackendConfig, 56);

/* Plain data without a header: frozen forever, in every minor. */
AT(QhEdgeRef, reserved, 12);
_Static_assert(sizeof(QhEdgeRef) == 16, "QhEdgeRef is frozen");
AT(QhOption, value, 8);
_Static_assert(sizeof(QhOption) == 16, "QhOption is frozen");

/* ---- ABI 1.0 constants a plugin compiles in: explicit values, only ever appended ---- */
_Static_assert(QH_ERR_INVALID_ARGUMENT == 1 && QH_ERR_UNSUPPORTED == 2 && QH_ERR_OUT_OF_MEMORY == 3 &&
               QH_ERR_INVALID_STATE == 4 && QH_ERR_ABI_MISMATCH == 5 && QH_ERR_IO == 6 &&
               QH_ERR_INTERNAL == 7 && QH_ERR_DEPRECATED == 8 && QH_ERR_NOT_FOUND == 9,
               "status codes");
_Static_assert(QH_DTYPE_FLOAT == 1 && QH_DTYPE_UINT8 == 2 && QH_DTYPE_INT8 == 3 && QH_DTYPE_INT32 == 6 &&
               QH_DTYPE_FLOAT16 == 10, "dtypes are ONNX's codes");
_Static_assert(QH_QSCHEME_PER_TENSOR_AFFINE == 0 && QH_QSCHEME_PER_CHANNEL_SYMMETRIC == 3,
               "qschemes are PyTorch's order");
_Static_assert(QH_SPEC_QUANTIZE == 1 && QH_SPEC_FLOAT == 5, "spec kinds");
_Static_assert(QH_INVALID_ID == 0xffffffffu && QH_MAX_RANK == 8 && QH_PATTERN_MAX_OPS == 3, "limits");
#if QH_ABI_MINOR >= 2
_Static_assert(QH_LOWERING_PATTERN_MAX_OPS == 4, "lowering patterns of ABI 1.2 may have four ops");
#endif

int main(void) {
  printf("ABI 1.0%s layout holds (SDK %d.%d)\n", QH_ABI_MINOR >= 1 ? " and 1.1" : "", QH_ABI_MAJOR,
         QH_ABI_MINOR);
  return 0;
}

#else

int main(void) {
  printf("skipped: the frozen literals describe x86-64 only\n");
  return 77;
}

#endif
