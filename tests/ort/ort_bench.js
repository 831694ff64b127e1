#!/usr/bin/env node
// Times ONNX Runtime's session.run on one input and prints the same JSON as
// `qhost bench --json`, so bench/bench_fp32_vs_ort.py can put both side by side.
//   node ort_bench.js MODEL.onnx IN.npy [--threads N] [--warmup W] [--runs R]
// Only session.run is timed (process.hrtime.bigint); session creation and
// input loading are not. Exit 0 ok, 1 failure, 2 usage.
'use strict';

const path = require('path');
const { parseArgs, positiveInt, createSession, loadFeeds, loadOrt, usage } = require('./common');

const USAGE = 'node ort_bench.js MODEL.onnx IN.npy [--threads N] [--warmup W] [--runs R]';

async function main() {
  const { pos, opts } = parseArgs(process.argv.slice(2), ['threads', 'warmup', 'runs'], USAGE);
  if (pos.length !== 2) usage(USAGE);
  const [modelPath, inPath] = pos;
  const threads = opts.threads === undefined ? 1 : positiveInt(opts.threads, 'threads', USAGE);
  const warmup = opts.warmup === undefined ? 3 : positiveInt(opts.warmup, 'warmup', USAGE, true);
  const runs = opts.runs === undefined ? 10 : positiveInt(opts.runs, 'runs', USAGE);
  const ort = loadOrt();
  let session;
  try {
    session = await createSession(ort, modelPath, threads);
  } catch (e) {
    throw new Error(`${modelPath}: ${e.message.split('\n')[0]}`);
  }
  const feeds = loadFeeds(ort, session, inPath);
  for (let i = 0; i < warmup; i++) await session.run(feeds);
  const ms = [];
  for (let i = 0; i < runs; i++) {
    const t0 = process.hrtime.bigint();
    await session.run(feeds);
    const t1 = process.hrtime.bigint();
    ms.push(Number(t1 - t0) / 1e6);
  }
  ms.sort((a, b) => a - b);
  const mid = Math.floor(runs / 2);
  const median = runs % 2 ? ms[mid] : (ms[mid - 1] + ms[mid]) / 2;
  const out = {
    schema_version: 1,
    model: path.basename(modelPath),
    threads,
    warmup,
    runs,
    median_ms: median,
    min_ms: ms[0],
    max_ms: ms[runs - 1],
  };
  process.stdout.write(JSON.stringify(out) + '\n');
}

main().catch((e) => {
  process.stderr.write(`ort_bench: ${e.message.split('\n')[0]}\n`);
  process.exit(1);
});
