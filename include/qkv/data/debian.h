// qkv/data/debian.h - fetching Debian packages and archive indexes into a local cache, and
// reading files out of .deb archives. Used by the corpus builders (corpus_*.h).
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace qkv::data {

// $QKV_CACHE if set, else $HOME/.cache/qkv.
std::string default_cache_dir();

// Package names from a list file: one per line; '#' starts a comment; blank lines ignored.
std::vector<std::string> read_package_list(const std::string& path);

// The cached .deb of `package` in `deb_dir` ("" if none): apt-get's "<name>_<version>_<arch>.deb".
std::string find_cached_deb(const std::string& deb_dir, const std::string& package);

// Ensures deb_dir holds a .deb for every package, running `apt-get download` (in deb_dir) for the
// missing ones only; nothing runs when all are cached (works offline). Returns package -> path.
// Throws qkv::Error with apt's message if a download fails.
std::map<std::string, std::string> fetch_debs(const std::vector<std::string>& packages,
                                              const std::string& deb_dir, bool verbose);

// Streams the data archive of a .deb (dpkg-deb --fsys-tarfile) and calls on_file(path, bytes)
// for each regular file whose path (without "./") satisfies want(path). A .deb that cannot be read
// (a cached file cut short) is removed, and the error says to run the command again.
void extract_deb_files(const std::string& deb,
                       const std::function<bool(const std::string& path)>& want,
                       const std::function<void(const std::string& path, std::string&& data)>& on_file);

// Version of a .deb (dpkg-deb --field Version).
std::string deb_version(const std::string& deb);

// An index file of the Debian archive, e.g. "main/i18n/Translation-en.xz", for the suite in
// the system's apt lists (default "bookworm"). Its SHA256 comes from the local, apt-verified
// InRelease; the file is fetched with apt's own downloader (apt-helper) into
// <cache>/indexes/<sha256>-<name> and reused while the hash matches. Returns the cached path.
std::string fetch_archive_index(const std::string& relpath, const std::string& cache_dir,
                                const std::string& suite = "bookworm", bool verbose = false);

// Decompressed contents of an index file (.xz, .gz, .lz4 or plain), via the system tools.
std::string read_compressed(const std::string& path);

}  // namespace qkv::data
