#!/usr/bin/env python3
"""Independent check of a built parallel corpus directory (train/valid/test.tsv, packages.tsv,
stats.json):

  check_mt_corpus.py DIR [EXPECTED_JSON]

- recounts lines, whitespace tokens and types per split and side and compares with stats.json;
- checks the held-out rules: no package in two splits, no duplicate pair within a split, no
  valid/test English side that occurs in train, no test English side that occurs in valid;
- with EXPECTED_JSON (from make_mini_corpus.py): recomputes every split's pair set from the
  designed "keep" pairs and the package split recorded in packages.tsv, and the drop counts.
Exits 1 listing every mismatch.
"""
import collections
import json
import sys


def read_tsv(path):
    with open(path, encoding='utf-8') as f:
        return [tuple(line.rstrip('\n').split('\t')) for line in f]


def main(d, expected_path=None):
    errors = []
    stats = json.load(open(d + '/stats.json', encoding='utf-8'))
    splits = {s: read_tsv('%s/%s.tsv' % (d, s)) for s in ('train', 'valid', 'test')}
    for s, rows in splits.items():
        for r in rows:
            if len(r) != 2:
                errors.append('%s: row with %d fields: %r' % (s, len(r), r))
        st = stats['splits'][s]
        if st['pairs'] != len(rows):
            errors.append('%s: stats pairs %d, file has %d' % (s, st['pairs'], len(rows)))
        for side, col in (('src', 0), ('tgt', 1)):
            toks = [t for r in rows for t in r[col].split(' ') if t]
            want = {'lines': len(rows), 'tokens': len(toks), 'types': len(set(toks))}
            if st[side] != want:
                errors.append('%s %s: stats %s, recount %s' % (s, side, st[side], want))
        if len(set(rows)) != len(rows):
            errors.append('%s: duplicate pairs' % s)
    train_en = {r[0] for r in splits['train']}
    valid_en = {r[0] for r in splits['valid']}
    for s in ('valid', 'test'):
        leak = [r for r in splits[s] if r[0] in train_en]
        if leak:
            errors.append('%s: %d English sides occur in train, e.g. %r' % (s, len(leak), leak[0]))
    leak = [r for r in splits['test'] if r[0] in valid_en]
    if leak:
        errors.append('test: %d English sides occur in valid' % len(leak))
    pk = read_tsv(d + '/packages.tsv')[1:]
    split_of = {r[0]: r[2] for r in pk}
    if stats['pairs'] != sum(len(v) for v in splits.values()):
        errors.append('total pairs mismatch')
    if expected_path:
        exp = json.load(open(expected_path, encoding='utf-8'))['packages']
        if set(exp) != set(split_of):
            errors.append('packages.tsv lists %s, expected %s' % (sorted(split_of), sorted(exp)))
        want = {}
        drops = collections.Counter()
        for s in ('train', 'valid', 'test'):
            pairs = []
            for p in sorted(exp):
                if split_of.get(p) != s:
                    continue
                for e in exp[p]:
                    if 'keep' in e:
                        pairs.append(tuple(e['keep']))
                    else:
                        drops[e['drop']] += 1
            want[s] = set(pairs)
        want['valid'] = {r for r in want['valid'] if r[0] not in {x[0] for x in want['train']}}
        train_en = {x[0] for x in want['train']}
        valid_en = {x[0] for x in want['valid']}
        want['test'] = {r for r in want['test'] if r[0] not in train_en and r[0] not in valid_en}
        for s in want:
            if want[s] != set(splits[s]):
                errors.append('%s: expected %s, got %s' % (s, sorted(want[s]), sorted(splits[s])))
        drops['header'] = len(exp)  # one header entry per catalog
        if dict(drops) != stats['dropped']:
            errors.append('dropped: expected %s, stats %s' % (dict(drops), stats['dropped']))
    for e in errors:
        print('check_mt_corpus:', e)
    return 1 if errors else 0


if __name__ == '__main__':
    sys.exit(main(*sys.argv[1:]))
