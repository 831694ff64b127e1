// Minimal NumPy .npy reader/writer for the ONNX Runtime reference scripts.
// Supports little-endian float32, int64, int32, int8, uint8 (and bool as uint8),
// C order, format versions 1.0, 2.0 and 3.0. Kept dependency-free so the only
// package the reference needs is onnxruntime-node itself.
'use strict';

const fs = require('fs');

const MAGIC = Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59]); // \x93NUMPY

// descr -> [ORT tensor type, TypedArray constructor, item size]
const DTYPES = {
  '<f4': ['float32', Float32Array, 4],
  '<i8': ['int64', BigInt64Array, 8],
  '<i4': ['int32', Int32Array, 4],
  '|i1': ['int8', Int8Array, 1],
  '|u1': ['uint8', Uint8Array, 1],
  '|b1': ['bool', Uint8Array, 1],
};
const DESCR_OF = {
  float32: '<f4', int64: '<i8', int32: '<i4', int8: '|i1', uint8: '|u1', bool: '|b1',
};

function fail(path, msg) {
  throw new Error(`${path}: ${msg}`);
}

function parseHeader(path, text) {
  const descr = /'descr'\s*:\s*'([^']+)'/.exec(text);
  const order = /'fortran_order'\s*:\s*(True|False)/.exec(text);
  const shape = /'shape'\s*:\s*\(([^)]*)\)/.exec(text);
  if (!descr || !order || !shape) fail(path, `malformed .npy header: ${text.trim()}`);
  if (order[1] !== 'False') fail(path, 'Fortran-order arrays are not supported');
  let d = descr[1];
  if (d === '<u1' || d === '<i1' || d === '<b1') d = '|' + d.slice(1);
  if (d === '=f4') d = '<f4';
  if (!(d in DTYPES)) fail(path, `unsupported dtype ${descr[1]}`);
  const dims = shape[1].split(',').map((s) => s.trim()).filter((s) => s.length > 0).map((s) => {
    const n = Number(s);
    if (!Number.isSafeInteger(n) || n < 0) fail(path, `bad dimension ${s}`);
    return n;
  });
  return { descr: d, dims };
}

// Returns { type, dims, data } where data is a TypedArray (copied, aligned).
function readNpy(path) {
  const buf = fs.readFileSync(path);
  if (buf.length < 10 || !buf.subarray(0, 6).equals(MAGIC)) fail(path, 'not a .npy file (bad magic)');
  const major = buf[6];
  let hlen;
  let off;
  if (major === 1) {
    hlen = buf.readUInt16LE(8);
    off = 10;
  } else if (major === 2 || major === 3) {
    if (buf.length < 12) fail(path, 'truncated header');
    hlen = buf.readUInt32LE(8);
    off = 12;
  } else {
    fail(path, `unsupported .npy version ${major}.${buf[7]}`);
  }
  if (off + hlen > buf.length) fail(path, 'truncated header');
  const header = buf.subarray(off, off + hlen).toString(major === 3 ? 'utf8' : 'latin1');
  const { descr, dims } = parseHeader(path, header);
  const [type, Ctor, size] = DTYPES[descr];
  const count = dims.reduce((a, b) => a * b, 1);
  if (!Number.isSafeInteger(count * size)) fail(path, 'array too large');
  const start = off + hlen;
  if (buf.length - start < count * size) {
    fail(path, `truncated data: need ${count * size} bytes, have ${buf.length - start}`);
  }
  // Copy into a fresh ArrayBuffer so the typed array is aligned for its element size.
  const ab = new ArrayBuffer(count * size);
  buf.copy(Buffer.from(ab), 0, start, start + count * size);
  return { type, dims, data: new Ctor(ab) };
}

function writeNpy(path, type, dims, data) {
  const descr = DESCR_OF[type];
  if (!descr) fail(path, `cannot write tensor of type ${type}`);
  const shape = dims.length === 1 ? `(${dims[0]},)` : `(${dims.join(', ')})`;
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shape}, }`;
  // Pad with spaces so magic + version + length + header + '\n' is a multiple of 64.
  const pre = 10;
  const total = Math.ceil((pre + header.length + 1) / 64) * 64;
  if (total - pre > 0xffff) fail(path, 'header too long for .npy v1.0');
  header = header + ' '.repeat(total - pre - header.length - 1) + '\n';
  const head = Buffer.alloc(pre);
  MAGIC.copy(head, 0);
  head[6] = 1;
  head[7] = 0;
  head.writeUInt16LE(header.length, 8);
  const body = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  fs.writeFileSync(path, Buffer.concat([head, Buffer.from(header, 'latin1'), body]));
}

module.exports = { readNpy, writeNpy };
