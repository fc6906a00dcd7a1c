// Writes one byte per code point U+0000..U+10FFFF (surrogates written as 0): bit 0 = /\p{L}/u,
// bit 1 = /\p{N}/u, bit 2 = /\s/u, as this node's regex engine sees them.
// usage: node js_unicode_classes.js OUT
const L = /\p{L}/u, N = /\p{N}/u, S = /\s/u;
const out = Buffer.alloc(0x110000);
for (let c = 0; c <= 0x10FFFF; c++) {
  if (c >= 0xD800 && c <= 0xDFFF) continue;
  const s = String.fromCodePoint(c);
  out[c] = (L.test(s) ? 1 : 0) | (N.test(s) ? 2 : 0) | (S.test(s) ? 4 : 0);
}
require('fs').writeFileSync(process.argv[2], out);
console.log(process.versions.unicode);
