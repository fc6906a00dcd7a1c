"""Minimal GNU .mo writer (independent of qkv), following the gettext manual's format section.

entries: list of dicts {ctx: str|None, id: str, plural: str|None, str: [forms]}; strings are
encoded as UTF-8. Returns the file bytes in the requested byte order ('<' little, '>' big).
"""
import struct


def entry_key(e):
    k = e['id'].encode()
    if e.get('ctx') is not None:
        k = e['ctx'].encode() + b'\x04' + k
    if e.get('plural') is not None:
        k += b'\x00' + e['plural'].encode()
    return k


def entry_value(e):
    return b'\x00'.join(s.encode() for s in e['str'])


def write_mo(entries, order='<'):
    items = sorted((entry_key(e), entry_value(e)) for e in entries)  # msgfmt sorts by msgid
    n = len(items)
    orig_table = 28
    trans_table = orig_table + 8 * n
    data_start = trans_table + 8 * n
    blob = b''
    otab, ttab = [], []
    for k, _ in items:
        otab.append((len(k), data_start + len(blob)))
        blob += k + b'\x00'
    for _, v in items:
        ttab.append((len(v), data_start + len(blob)))
        blob += v + b'\x00'
    out = struct.pack(order + '7I', 0x950412de, 0, n, orig_table, trans_table, 0, 0)
    for ln, off in otab:
        out += struct.pack(order + '2I', ln, off)
    for ln, off in ttab:
        out += struct.pack(order + '2I', ln, off)
    return out + blob


def po_quote(s):
    return '"' + s.replace('\\', '\\\\').replace('"', '\\"').replace('\n', '\\n').replace('\t', '\\t') + '"'


def write_po(entries):
    """The same entries as a .po file (for GNU msgfmt as a second, independent writer)."""
    out = []
    for e in entries:
        if e.get('ctx') is not None:
            out.append('msgctxt ' + po_quote(e['ctx']))
        out.append('msgid ' + po_quote(e['id']))
        if e.get('plural') is not None:
            out.append('msgid_plural ' + po_quote(e['plural']))
            for i, s in enumerate(e['str']):
                out.append('msgstr[%d] %s' % (i, po_quote(s)))
        else:
            out.append('msgstr ' + po_quote(e['str'][0]))
        out.append('')
    return '\n'.join(out) + '\n'
