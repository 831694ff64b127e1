// Shared helpers for ort_run.js and ort_bench.js: argument parsing, session
// creation with the options both scripts must agree on, and feeds from .npy.
'use strict';

const { readNpy } = require('./npy');

function usage(text) {
  process.stderr.write(`usage: ${text}\n`);
  process.exit(2);
}

// Splits argv into positionals and --key value options; flags in `known` only.
function parseArgs(argv, known, usageText) {
  const pos = [];
  const opts = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '-h' || a === '--help') {
      process.stdout.write(`usage: ${usageText}\n`);
      process.exit(0);
    }
    if (a.startsWith('--')) {
      const key = a.slice(2);
      if (!known.includes(key) || i + 1 >= argv.length) usage(usageText);
      opts[key] = argv[++i];
    } else {
      pos.push(a);
    }
  }
  return { pos, opts };
}

function positiveInt(value, name, usageText, allowZero = false) {
  const n = Number(value);
  if (!Number.isInteger(n) || n < (allowZero ? 0 : 1)) {
    process.stderr.write(`--${name} must be a ${allowZero ? 'non-negative' : 'positive'} integer\n`);
    usage(usageText);
  }
  return n;
}

// Whether ONNX Runtime's uint8 x int8 kernels (MLAS U8S8) are exact on this CPU. With
// AVX-512 VNNI or AVX-VNNI they multiply-add into int32; without (an AVX2-only EPYC)
// they use VPMADDUBSW, which adds two u8 x s8 products in int16 with saturation, so a
// QDQ model with full-range uint8 activations and int8 weights leaves its own numerics
// (measured under an emulated EPYC-Rome: the x86-quantized digits model 21% within one
// step of ORT's own float Q/DQ run). QH_ORT_QDQ=int8|float overrides.
function u8s8Exact() {
  const forced = process.env.QH_ORT_QDQ;
  if (forced === 'int8') return true;
  if (forced === 'float') return false;
  try {
    const flags = require('fs').readFileSync('/proc/cpuinfo', 'utf8').split(/\s+/);
    return flags.includes('avx512_vnni') || flags.includes('avx_vnni');
  } catch (e) {
    return true;
  }
}

// reference: the session is the numerics oracle of a test (ort_run.js). Where ORT's
// int8 kernels would saturate, it then runs Q/DQ as written (DequantizeLinear, float op,
// QuantizeLinear: session.disable_quant_qdq) and says so on stderr. Benchmarks
// (ort_bench.js) always time ORT's own int8 kernels.
async function createSession(ort, modelPath, threads, reference = false) {
  const options = {
    executionProviders: ['cpu'],
    graphOptimizationLevel: 'all',
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
  };
  if (reference && !u8s8Exact()) {
    options.extra = { session: { disable_quant_qdq: '1' } };
    process.stderr.write('ort_run: no VNNI on this CPU: ONNX Runtime runs Q/DQ in float ' +
                         '(session.disable_quant_qdq), as its U8S8 int8 kernels saturate here\n');
  }
  return ort.InferenceSession.create(modelPath, options);
}

// One .npy feeds a single-input model; .npz is not supported by this reader.
function loadFeeds(ort, session, inputPath) {
  if (inputPath.endsWith('.npz')) {
    throw new Error(`${inputPath}: .npz input is not supported by the ORT reference; pass a .npy`);
  }
  if (session.inputNames.length !== 1) {
    throw new Error(`${inputPath}: model has ${session.inputNames.length} inputs; a .npy feeds exactly one`);
  }
  const arr = readNpy(inputPath);
  return { [session.inputNames[0]]: new ort.Tensor(arr.type, arr.data, arr.dims) };
}

function loadOrt() {
  try {
    return require('onnxruntime-node');
  } catch (e) {
    process.stderr.write(`onnxruntime-node is not installed (cd ${__dirname} && npm install --ignore-scripts onnxruntime-node)\n`);
    process.exit(1);
  }
  return null;
}

module.exports = { parseArgs, positiveInt, createSession, loadFeeds, loadOrt, usage };
