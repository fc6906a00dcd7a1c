// Times gpt-3-encoder's encode() (the node reference) on a text file, line by line, one thread.
// usage: node gpt2_js_bench.js NODE_MODULES_PARENT FILE
// Prints MB/s over the file's UTF-8 bytes; the file is read and split before the clock starts.
const fs = require('fs');
const path = require('path');
const [base, file] = process.argv.slice(2);
const { encode } = require(path.join(base, 'node_modules', 'gpt-3-encoder'));
const text = fs.readFileSync(file, 'utf-8');
const lines = text.split(/(?<=\n)/);
const bytes = Buffer.byteLength(text, 'utf-8');
const t0 = process.hrtime.bigint(), c0 = process.cpuUsage();
let n = 0;
for (const l of lines) n += encode(l).length;
const s = Number(process.hrtime.bigint() - t0) / 1e9;
const cu = process.cpuUsage(c0), c = (cu.user + cu.system) / 1e6;  // all node threads (GC too)
console.log(`gpt-3-encoder (node ${process.version}): ${(bytes / 1e6).toFixed(2)} MB, ${n} tokens, ` +
            `wall ${s.toFixed(2)} s, cpu ${c.toFixed(2)} s, ${(bytes / 1e6 / c).toFixed(3)} MB/s (cpu)`);
