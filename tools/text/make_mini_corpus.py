#!/usr/bin/env python3
"""Writes a miniature "Debian" of gettext catalogs for tests/text/test_corpus_mt.cpp:

  OUTDIR/<package>/<domain>.mo   catalogs (tools/text/mo_writer.py), some big-endian
  OUTDIR/expected.json           {"packages": {pkg: [entry, ...]}} where each entry has the
                                 raw fields and either "keep": [en, de] (the cleaned pair) or
                                 "drop": reason - the designed outcome, written by hand here.

Every catalog is re-read with Python's gettext module and checked against the entries, so the
files are known-good before the C++ test reads them.
"""
import gettext
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mo_writer import write_mo  # noqa: E402

HEADER = 'Content-Type: text/plain; charset=UTF-8\nLanguage: de\n'


def E(en, de, keep=None, drop=None, ctx=None, plural=None, forms=None):
    e = {'ctx': ctx, 'id': en, 'plural': plural, 'str': forms if forms else [de]}
    if drop:
        e['drop'] = drop
    else:
        e['keep'] = keep if keep else [en, de]
    return e


LONG_EN = 'This sentence is repeated to make a very long entry. ' * 10
LONG_DE = 'Dieser Satz wird wiederholt, um einen sehr langen Eintrag zu bilden. ' * 10

PACKAGES = {
    'alpha': [
        E('Open file', 'Datei öffnen'),
        E('_Save', '_Speichern', keep=['Save', 'Speichern']),
        E('Save _As…', 'Speichern _unter…', keep=['Save As…', 'Speichern unter…']),
        E('&File', '&Datei', keep=['File', 'Datei']),
        E('Pr_eferences', '_Einstellungen', keep=['Preferences', 'Einstellungen']),
        E('%d file', '', plural='%d files', forms=['%d Datei', '%d Dateien'], drop='plural'),
        E('translator-credits', 'Max Mustermann <max@example.org>', drop='credits'),
        E('Quit', 'Beenden', ctx='menu'),
    ],
    'beta': [
        E('Use file_name here', 'Verwenden Sie file_name hier'),
        E('Call AT&T now', 'Rufen Sie AT&T jetzt an'),
        E('Tom &amp; Jerry', 'Tom &amp; Jerry zusammen'),
        E('  multiple   spaces\nand lines ', 'mehrere  Leerzeichen\tund\r\nZeilen',
          keep=['multiple spaces and lines', 'mehrere Leerzeichen und Zeilen']),
        E('Your names', 'Max', drop='credits'),
        E('%s: %d', '%s: %d', drop='no_words'),
        E('Open file', 'Datei öffnen'),  # duplicate of alpha's pair
    ],
    'gamma': [
        E('<b>%s</b>', '<b>%s</b>', drop='no_words'),
        E('...', '…', drop='no_words'),
        E('Linux kernel', 'Linux kernel', drop='identical'),
        E('Hello world', '', drop='empty'),
        E(LONG_EN, LONG_DE, drop='too_long'),
        E('A short text', 'Ein sehr sehr langer deutscher Text, der viel länger ist als der englische',
          drop='length_ratio'),
        E('Yes', 'Ja'),
        E('Cancel', 'Abbrechen'),
    ],
    'delta': [
        E('Print the version', 'Die Version ausgeben'),
        E('Cancel', 'Abbruch'),  # English side also in gamma
        E('Show help', 'Hilfe anzeigen'),
        E('Größe: 日本語', 'Size in Japanese: 日本語', keep=['Größe: 日本語', 'Size in Japanese: 日本語']),
    ],
    'epsilon': [
        E('Read the manual', 'Das Handbuch lesen'),
        E('Quit', 'Verlassen'),
        E('Delete %s?', '%s löschen?'),
        E('Disk full', 'Datenträger voll', ctx='error'),
    ],
    'zeta': [
        E('Connect to %s', 'Mit %s verbinden'),
        E('Open file', 'Datei öffnen'),
        E('Network error', 'Netzwerkfehler'),
    ],
    'eta': [
        E('Cancel', 'Abbrechen'),
        E('Downloading…', 'Wird heruntergeladen …'),
        E('Connect to %s', 'Verbinde mit %s'),
    ],
    'theta': [
        E('Yes', 'Ja'),
        E('No', 'Nein'),
        E('Try again later', 'Später erneut versuchen'),
    ],
}


def main(outdir):
    for i, (pkg, entries) in enumerate(sorted(PACKAGES.items())):
        d = os.path.join(outdir, pkg)
        os.makedirs(d, exist_ok=True)
        full = [{'ctx': None, 'id': '', 'plural': None, 'str': [HEADER]}] + entries
        path = os.path.join(d, pkg + '.mo')
        with open(path, 'wb') as f:
            f.write(write_mo(full, '>' if i % 3 == 1 else '<'))
        with open(path, 'rb') as f:
            cat = gettext.GNUTranslations(f)._catalog
        for e in entries:
            key = (e['ctx'] + '\x04' if e['ctx'] else '') + e['id']
            if e['plural']:
                assert cat[(key, 1)] == e['str'][1], (pkg, key)
            else:
                assert cat[key] == e['str'][0], (pkg, key)
    with open(os.path.join(outdir, 'expected.json'), 'w', encoding='utf-8') as f:
        json.dump({'packages': PACKAGES}, f, ensure_ascii=False, indent=1)


if __name__ == '__main__':
    main(sys.argv[1])
