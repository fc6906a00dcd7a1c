#!/usr/bin/env python3
"""Writes .mo test files for tests/text/test_mo.cpp into OUTDIR:

  basic_le.mo, basic_be.mo     hand-written (tools/text/mo_writer.py), both byte orders
  msgfmt_le.mo, msgfmt_be.mo   the same catalog compiled by GNU msgfmt (if installed)
  expected.json                {"entries": [...], "python_catalog": [[key, value], ...],
                                "corrupt": [{"file", "expect": [substrings]}], "msgfmt": bool}
  corrupt/*.mo                 truncated / corrupted variants

python_catalog is what Python's gettext.GNUTranslations reads from basic_le.mo (an independent
parser); key is a string or [msgid, plural_index].
"""
import gettext
import json
import os
import shutil
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mo_writer import write_mo, write_po  # noqa: E402

HEADER = ('Project-Id-Version: qkv-test 1.0\nLanguage: de\nMIME-Version: 1.0\n'
          'Content-Type: text/plain; charset=UTF-8\nContent-Transfer-Encoding: 8bit\n'
          'Plural-Forms: nplurals=2; plural=(n != 1);\n')

ENTRIES = [
    {'ctx': None, 'id': '', 'plural': None, 'str': [HEADER]},
    {'ctx': None, 'id': 'Open file', 'plural': None, 'str': ['Datei öffnen']},
    {'ctx': None, 'id': '_Save', 'plural': None, 'str': ['_Speichern']},
    {'ctx': 'menu', 'id': 'File', 'plural': None, 'str': ['Datei']},
    {'ctx': 'verb', 'id': 'Open', 'plural': None, 'str': ['Öffnen']},
    {'ctx': None, 'id': '%d file', 'plural': '%d files', 'str': ['%d Datei', '%d Dateien']},
    {'ctx': 'disk', 'id': '%d byte', 'plural': '%d bytes', 'str': ['%d Byte', '%d Bytes']},
    {'ctx': None, 'id': 'Line one\nline two\tand tab', 'plural': None,
     'str': ['Zeile eins\nZeile zwei\tund Tab']},
    {'ctx': None, 'id': 'Größe: 日本語 🙂', 'plural': None, 'str': ['Size: 日本語 🙂']},
    {'ctx': None, 'id': 'Untranslated but present', 'plural': None, 'str': ['']},
]


def corrupt_variants(good):
    """(name, bytes, expected substrings of the error) for broken copies of `good` (LE)."""
    n, otab, ttab = struct.unpack_from('<III', good, 8)
    out = []
    out.append(('short_header', good[:20], ['truncated header', '20']))
    out.append(('bad_magic', b'\x00\x00\x00\x00' + good[4:], ['bad magic']))
    out.append(('bad_revision', good[:4] + struct.pack('<I', 2 << 16) + good[8:],
                ['major revision', '2']))
    # Table of translations cut off by truncating the file inside it.
    out.append(('truncated_table', good[:ttab + 12], ['translations', 'past end']))
    # Entry 3's msgstr offset points past the end.
    b = bytearray(good)
    struct.pack_into('<I', b, ttab + 3 * 8 + 4, len(good) + 100)
    out.append(('msgstr_offset', bytes(b), ['entry 3', 'msgstr', 'past end']))
    # Entry 5's msgid length runs past the end.
    b = bytearray(good)
    struct.pack_into('<I', b, otab + 5 * 8, 0x7fffffff)
    out.append(('msgid_length', bytes(b), ['entry 5', 'msgid', 'past end']))
    # Entry 2's msgid loses its NUL terminator.
    b = bytearray(good)
    ln, off = struct.unpack_from('<II', good, otab + 2 * 8)
    b[off + ln] = ord('X')
    out.append(('no_nul', bytes(b), ['entry 2', 'msgid', 'NUL']))
    # String count much larger than the file.
    b = bytearray(good)
    struct.pack_into('<I', b, 8, 1 << 30)
    out.append(('huge_count', bytes(b), ['original strings', 'past end']))
    # File truncated inside the string data (last msgstr cut).
    out.append(('truncated_data', good[:len(good) - 5], ['entry', 'msgstr', 'past end']))
    return out


def main(outdir):
    os.makedirs(os.path.join(outdir, 'corrupt'), exist_ok=True)
    le = write_mo(ENTRIES, '<')
    with open(os.path.join(outdir, 'basic_le.mo'), 'wb') as f:
        f.write(le)
    with open(os.path.join(outdir, 'basic_be.mo'), 'wb') as f:
        f.write(write_mo(ENTRIES, '>'))
    with open(os.path.join(outdir, 'basic_le.mo'), 'rb') as f:
        cat = gettext.GNUTranslations(f)._catalog
    pycat = [[list(k) if isinstance(k, tuple) else k, v] for k, v in cat.items()]
    corrupt = []
    for name, data, expect in corrupt_variants(le):
        path = os.path.join(outdir, 'corrupt', name + '.mo')
        with open(path, 'wb') as f:
            f.write(data)
        corrupt.append({'file': name + '.mo', 'expect': expect})
    have_msgfmt = shutil.which('msgfmt') is not None
    if have_msgfmt:
        po = os.path.join(outdir, 'basic.po')
        with open(po, 'w', encoding='utf-8') as f:
            f.write(write_po(ENTRIES))
        for tag, order in (('le', 'little'), ('be', 'big')):
            subprocess.run(['msgfmt', '--endianness=' + order, '-o',
                            os.path.join(outdir, 'msgfmt_%s.mo' % tag), po], check=True)
    with open(os.path.join(outdir, 'expected.json'), 'w', encoding='utf-8') as f:
        json.dump({'entries': ENTRIES, 'python_catalog': pycat, 'corrupt': corrupt,
                   'msgfmt': have_msgfmt}, f, ensure_ascii=False)


if __name__ == '__main__':
    main(sys.argv[1])
