// Minimal .npy (format 1.0/2.0/3.0) reader and writer for the reference scripts: little-endian,
// C-order arrays of the dtypes the real models use.
'use strict';
const fs = require('fs');

const DESCR_TO_ORT = {
  '<f4': {type: 'float32', array: Float32Array},
  '<f8': {type: 'float64', array: Float64Array},
  '<i8': {type: 'int64', array: BigInt64Array},
  '<i4': {type: 'int32', array: Int32Array},
  '|u1': {type: 'uint8', array: Uint8Array},
  '|i1': {type: 'int8', array: Int8Array},
  '|b1': {type: 'bool', array: Uint8Array},
};
const ORT_TO_DESCR = Object.fromEntries(Object.entries(DESCR_TO_ORT).map(([descr, t]) => [t.type, descr]));

const MAGIC = Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59]);  // "\x93NUMPY"

// Returns {type, dims, data} with data a typed array (a copy, so it is aligned).
function readNpy(path) {
  const bytes = fs.readFileSync(path);
  if (bytes.length < 10 || !bytes.subarray(0, 6).equals(MAGIC)) throw new Error(`${path}: not a .npy file`);
  const major = bytes[6];
  const headerLength = major === 1 ? bytes.readUInt16LE(8) : bytes.readUInt32LE(8);
  const headerStart = major === 1 ? 10 : 12;
  const header = bytes.subarray(headerStart, headerStart + headerLength).toString('latin1');
  const descr = /'descr'\s*:\s*'([^']+)'/.exec(header);
  const fortran = /'fortran_order'\s*:\s*(True|False)/.exec(header);
  const shape = /'shape'\s*:\s*\(([^)]*)\)/.exec(header);
  if (!descr || !fortran || !shape) throw new Error(`${path}: malformed header ${header}`);
  if (fortran[1] === 'True') throw new Error(`${path}: Fortran-order arrays are not supported`);
  const kind = DESCR_TO_ORT[descr[1]];
  if (!kind) throw new Error(`${path}: unsupported dtype ${descr[1]}`);
  const dims = shape[1].split(',').map(s => s.trim()).filter(s => s.length > 0).map(Number);
  const count = dims.reduce((a, b) => a * b, 1);
  const dataStart = headerStart + headerLength;
  const byteLength = count * kind.array.BYTES_PER_ELEMENT;
  if (bytes.length < dataStart + byteLength) throw new Error(`${path}: truncated data`);
  const data = new kind.array(count);
  Buffer.from(data.buffer).set(bytes.subarray(dataStart, dataStart + byteLength));
  return {type: kind.type, dims, data};
}

function writeNpy(path, type, dims, data) {
  const descr = ORT_TO_DESCR[type];
  if (!descr) throw new Error(`writeNpy: unsupported type ${type}`);
  const shape = dims.length === 1 ? `(${dims[0]},)` : `(${dims.join(', ')})`;
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shape}, }`;
  // Header padded with spaces and ended by '\n' so the data starts at a multiple of 64 bytes.
  const total = Math.ceil((10 + header.length + 1) / 64) * 64;
  header = header + ' '.repeat(total - 10 - header.length - 1) + '\n';
  const prefix = Buffer.alloc(10);
  MAGIC.copy(prefix, 0);
  prefix[6] = 1;
  prefix[7] = 0;
  prefix.writeUInt16LE(header.length, 8);
  const body = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  fs.writeFileSync(path, Buffer.concat([prefix, Buffer.from(header, 'latin1'), body]));
}

module.exports = {readNpy, writeNpy};
