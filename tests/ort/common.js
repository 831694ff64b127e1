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

async function createSession(ort, modelPath, threads) {
  return ort.InferenceSession.create(modelPath, {
    executionProviders: ['cpu'],
    graphOptimizationLevel: 'all',
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
  });
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
