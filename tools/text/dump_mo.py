#!/usr/bin/env python3
"""Prints, as JSON, what Python's gettext.GNUTranslations reads from each .mo file given:
{path: [[key, value], ...]} with key a string ("ctx\\x04id") or [id, plural_index].
Catalogs in a charset Python cannot decode are read as bytes->latin-1 to keep the pairs."""
import gettext
import json
import sys


def read(path):
    with open(path, 'rb') as f:
        try:
            cat = gettext.GNUTranslations(f)._catalog
        except (UnicodeDecodeError, LookupError, ValueError):
            return None
    return [[list(k) if isinstance(k, tuple) else k, v] for k, v in cat.items()]


if __name__ == '__main__':
    json.dump({p: read(p) for p in sys.argv[1:]}, sys.stdout, ensure_ascii=False)
