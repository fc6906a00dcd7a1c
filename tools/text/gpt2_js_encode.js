// Reference ids from gpt-3-encoder (the JS port of OpenAI's GPT-2 encoder) for a test file.
// usage: node gpt2_js_encode.js NODE_MODULES_PARENT IN OUT [--pieces]
// The input is split into lines (each keeps its '\n'); OUT gets one line of space-separated ids
// per input line (with --pieces: the pattern's matches as hex byte strings instead).
//
// Invalid UTF-8: a JS string cannot hold raw bytes, so this harness decodes the file itself and
// carries every byte that starts no well-formed UTF-8 sequence as the private-use code point
// U+10FF00 + byte (general category Co, so the package's pattern sees it as "other", exactly like
// the one-character-per-invalid-byte rule of qkv), and the TextEncoder that the package uses is
// wrapped so that such a code point is encoded back to its single original byte. Everything else
// of the package (pattern, bytes_to_unicode, bpe, encoder.json, vocab.bpe) runs unchanged.
const fs = require('fs');
const path = require('path');

const [base, inPath, outPath, mode] = process.argv.slice(2);
const CARRIER = 0x10FF00;

const NativeEncoder = globalThis.TextEncoder;
class ByteCarryingEncoder {
  constructor() { this.inner = new NativeEncoder(); }
  encode(str) {
    const out = [];
    let plain = '';
    const flush = () => { if (plain) { for (const b of this.inner.encode(plain)) out.push(b); plain = ''; } };
    for (const ch of str) {
      const cp = ch.codePointAt(0);
      if (cp >= CARRIER && cp <= CARRIER + 0xFF) { flush(); out.push(cp - CARRIER); } else plain += ch;
    }
    flush();
    return Uint8Array.from(out);
  }
}
globalThis.TextEncoder = ByteCarryingEncoder;
const { encode } = require(path.join(base, 'node_modules', 'gpt-3-encoder'));

// Strict UTF-8 (Unicode Table 3-7); one carrier code point per byte that starts no valid sequence.
function decodeBytes(b) {
  let s = '';
  for (let i = 0; i < b.length;) {
    const b0 = b[i];
    const c = (k, lo = 0x80, hi = 0xBF) => i + k < b.length && b[i + k] >= lo && b[i + k] <= hi;
    let cp = -1, len = 1;
    if (b0 < 0x80) cp = b0;
    else if (b0 >= 0xC2 && b0 <= 0xDF && c(1)) { cp = ((b0 & 0x1F) << 6) | (b[i + 1] & 0x3F); len = 2; }
    else if (b0 >= 0xE0 && b0 <= 0xEF && c(1, b0 === 0xE0 ? 0xA0 : 0x80, b0 === 0xED ? 0x9F : 0xBF) && c(2)) {
      cp = ((b0 & 0x0F) << 12) | ((b[i + 1] & 0x3F) << 6) | (b[i + 2] & 0x3F); len = 3;
    } else if (b0 >= 0xF0 && b0 <= 0xF4 && c(1, b0 === 0xF0 ? 0x90 : 0x80, b0 === 0xF4 ? 0x8F : 0xBF) && c(2) && c(3)) {
      cp = ((b0 & 0x07) << 18) | ((b[i + 1] & 0x3F) << 12) | ((b[i + 2] & 0x3F) << 6) | (b[i + 3] & 0x3F); len = 4;
    }
    s += String.fromCodePoint(cp < 0 ? CARRIER + b0 : cp);
    i += len;
  }
  return s;
}

const pat = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;
const data = fs.readFileSync(inPath);
const out = [];
let start = 0;
while (start < data.length) {
  let end = data.indexOf(0x0A, start);
  end = end < 0 ? data.length : end + 1;
  const line = decodeBytes(data.subarray(start, end));
  if (mode === '--pieces') {
    const enc = new ByteCarryingEncoder();
    out.push(Array.from(line.matchAll(pat), m => Buffer.from(enc.encode(m[0])).toString('hex')).join(' '));
  } else {
    out.push(encode(line).join(' '));
  }
  start = end;
}
fs.writeFileSync(outPath, out.join('\n') + '\n');
