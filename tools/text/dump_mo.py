#!/usr/bin/env python3
"""Prints, as JSON, what Python's gettext.GNUTranslations reads from each .mo file given:
{path: [[key, value], ...]} with key a string ("ctx\\x04id") or [id, plural_index].

GNUTranslations decodes the header as UTF-8 before it knows the charset, so a Latin-1 catalog
whose header has a non-ASCII byte (a translator's name: enscript's, m4's) raises. Those are read
here instead by the published .mo layout (GNU gettext manual, "The Format of GNU MO Files"), every
string decoded by the header's charset, keys and plural forms as GNUTranslations makes them.
A catalog neither can decode gives null."""
import gettext
import json
import struct
import sys


def read_layout(data):
    magic = struct.unpack('<I', data[:4])[0]
    order = '<' if magic == 0x950412de else '>'
    _, n, orig, trans = struct.unpack(order + '4I', data[4:20])

    def string(table, i):
        length, offset = struct.unpack(order + '2I', data[table + 8 * i:table + 8 * i + 8])
        return data[offset:offset + length]

    pairs = [(string(orig, i), string(trans, i)) for i in range(n)]
    charset = 'ascii'
    for msgid, msgstr in pairs:
        if msgid == b'':
            for line in msgstr.decode('latin-1').split('\n'):
                if line.lower().startswith('content-type:') and 'charset=' in line:
                    charset = line.split('charset=')[1].strip()
    out = []
    for msgid, msgstr in pairs:
        if b'\x00' in msgid:  # plural: id \0 plural-id; forms \0-separated
            singular = msgid.split(b'\x00')[0].decode(charset)
            for i, form in enumerate(msgstr.split(b'\x00')):
                out.append([[singular, i], form.decode(charset)])
        else:
            out.append([msgid.decode(charset), msgstr.decode(charset)])
    return out


def read(path):
    with open(path, 'rb') as f:
        data = f.read()
    try:
        with open(path, 'rb') as f:
            cat = gettext.GNUTranslations(f)._catalog
        return [[list(k) if isinstance(k, tuple) else k, v] for k, v in cat.items()]
    except UnicodeDecodeError:
        try:
            return read_layout(data)
        except (UnicodeDecodeError, LookupError, ValueError, struct.error):
            return None
    except (LookupError, ValueError):
        return None


if __name__ == '__main__':
    json.dump({p: read(p) for p in sys.argv[1:]}, sys.stdout, ensure_ascii=False)
