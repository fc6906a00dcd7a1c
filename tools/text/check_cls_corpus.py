#!/usr/bin/env python3
"""Independent recount of a labelled corpus directory ({train,valid,test}.tsv "label\\ttext",
stats.json): examples, class counts, whitespace tokens and types per split.

  check_cls_corpus.py DIR [--sentiment FIXTURE_DIR | --polarity-csv CSV_FILE]

With --sentiment, also checks that the splits hold exactly the fixture sentences
(whitespace-normalised, duplicates once, sentences with contradicting labels dropped) with their
labels, and that each class is split 80/10/10 (to rounding). --polarity-csv does the same for a
"label","text" CSV file (label 1 -> "1", -1 -> "0"), read with Python's csv module: python3-pattern's
Pang & Lee files (1 positive) and its CoNLL-2010 uncertainty file (1 certain, -1 uncertain).
"""
import csv
import collections
import json
import os
import re
import sys


def main(argv):
    d = argv[0]
    errors = []
    stats = json.load(open(os.path.join(d, 'stats.json'), encoding='utf-8'))
    rows = {}
    for s in ('train', 'valid', 'test'):
        with open(os.path.join(d, s + '.tsv'), encoding='utf-8') as f:
            rows[s] = [line.rstrip('\n').split('\t') for line in f]
        bad = [r for r in rows[s] if len(r) != 2 or not r[1]]
        if bad:
            errors.append('%s: malformed rows, e.g. %r' % (s, bad[0]))
        st = stats['splits'][s]
        toks = [t for r in rows[s] for t in r[1].split(' ') if t]
        want = {'lines': len(rows[s]), 'tokens': len(toks), 'types': len(set(toks))}
        if st['text'] != want:
            errors.append('%s text: stats %s, recount %s' % (s, st['text'], want))
        if st['examples'] != len(rows[s]):
            errors.append('%s: stats examples %d, file %d' % (s, st['examples'], len(rows[s])))
        classes = dict(collections.Counter(r[0] for r in rows[s]))
        if st['classes'] != classes:
            errors.append('%s classes: stats %s, recount %s' % (s, st['classes'], classes))
    if len(argv) > 2 and argv[1] in ('--sentiment', '--polarity-csv'):
        labels = collections.defaultdict(set)
        # qkv's normalisation: runs of ASCII whitespace/control chars and U+00A0 -> ' '
        norm = lambda s: ' '.join(t for t in re.split(r'[\x00-\x20\x7f\xa0]+', s) if t)
        if argv[1] == '--sentiment':
            items = [(str(item['class']), item['text']) for name in ('amazon', 'imdb', 'yelp')
                     for item in json.load(open(os.path.join(argv[2], name + '.json'), encoding='utf-8'))]
        else:
            with open(argv[2], encoding='utf-8-sig', newline='') as f:
                items = [({'1': '1', '-1': '0'}[r[0]], r[1]) for r in csv.reader(f)]
        for label, raw in items:
            text = norm(raw)
            if text:
                labels[text].add(label)
        want = {(next(iter(v)), t) for t, v in labels.items() if len(v) == 1}
        got = [tuple(r) for s in rows for r in rows[s]]
        if len(got) != len(set(got)):
            errors.append('duplicate examples across splits')
        if set(got) != want:
            errors.append('examples differ from fixtures: %d missing, %d extra' %
                          (len(want - set(got)), len(set(got) - want)))
        for c in ('0', '1'):
            n = {s: sum(1 for r in rows[s] if r[0] == c) for s in rows}
            total = sum(n.values())
            for s, frac in (('valid', 0.1), ('test', 0.1)):
                if abs(n[s] - frac * total) > 1:
                    errors.append('class %s: %s has %d of %d' % (c, s, n[s], total))
    for e in errors:
        print('check_cls_corpus:', e)
    return 1 if errors else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
