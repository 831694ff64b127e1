#!/usr/bin/env node
// Runs an ONNX model through ONNX Runtime (CPU, all graph optimisations) on a
// .npy input and writes the output as .npy: the independent reference that
// qhost's parity tests compare against.
//   node ort_run.js MODEL.onnx IN.npy OUT.npy [--threads N]
// A model with several outputs writes the first to OUT.npy and output k to
// OUT with ".npy" replaced by ".<name>.npy". Exit 0 ok, 1 failure, 2 usage.
'use strict';

const { writeNpy } = require('./npy');
const { parseArgs, positiveInt, createSession, loadFeeds, loadOrt, usage } = require('./common');

const USAGE = 'node ort_run.js MODEL.onnx IN.npy OUT.npy [--threads N]';

async function main() {
  const { pos, opts } = parseArgs(process.argv.slice(2), ['threads'], USAGE);
  if (pos.length !== 3) usage(USAGE);
  const [modelPath, inPath, outPath] = pos;
  const threads = opts.threads === undefined ? 1 : positiveInt(opts.threads, 'threads', USAGE);
  const ort = loadOrt();
  let session;
  try {
    session = await createSession(ort, modelPath, threads, true);
  } catch (e) {
    throw new Error(`${modelPath}: ${e.message.split('\n')[0]}`);
  }
  const feeds = loadFeeds(ort, session, inPath);
  const results = await session.run(feeds);
  session.outputNames.forEach((name, k) => {
    const t = results[name];
    const path = k === 0 ? outPath : outPath.replace(/\.npy$/, '') + `.${name}.npy`;
    writeNpy(path, t.type, t.dims, t.data);
  });
}

main().catch((e) => {
  process.stderr.write(`ort_run: ${e.message.split('\n')[0]}\n`);
  process.exit(1);
});
