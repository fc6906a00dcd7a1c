#include "qkv/data/debian.h"

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "process.h"
#include "qkv/util/error.h"
#include "qkv/util/file.h"
#include "tar_stream.h"

namespace fs = std::filesystem;

namespace qkv::data {

std::string default_cache_dir() {
  if (const char* c = std::getenv("QKV_CACHE"); c && *c) return c;
  const char* home = std::getenv("HOME");
  QKV_CHECK(home && *home, "default_cache_dir", "neither QKV_CACHE nor HOME is set");
  return std::string(home) + "/.cache/qkv";
}

std::vector<std::string> read_package_list(const std::string& path) {
  std::string text = read_file(path);
  std::vector<std::string> out;
  size_t pos = 0, line_no = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    if (size_t h = line.find('#'); h != std::string::npos) line.resize(h);
    size_t b = line.find_first_not_of(" \t\r"), e = line.find_last_not_of(" \t\r");
    if (b == std::string::npos) continue;
    line = line.substr(b, e - b + 1);
    for (char c : line)
      QKV_CHECK(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '+' || c == '.',
                "package list '" + path + "'", "line ", line_no, ": '", line,
                "' is not a Debian package name");
    out.push_back(line);
  }
  return out;
}

std::string find_cached_deb(const std::string& deb_dir, const std::string& package) {
  std::string best;
  if (!fs::is_directory(deb_dir)) return best;
  for (const auto& ent : fs::directory_iterator(deb_dir)) {
    const std::string name = ent.path().filename().string();
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".deb") == 0 &&
        name.rfind(package + "_", 0) == 0 && name.find('_', package.size() + 1) != std::string::npos &&
        name > fs::path(best).filename().string())
      best = ent.path().string();
  }
  return best;
}

std::map<std::string, std::string> fetch_debs(const std::vector<std::string>& packages,
                                              const std::string& deb_dir, bool verbose) {
  fs::create_directories(deb_dir);
  const FileLock lock(deb_dir + "/.lock");  // one download into the cache at a time
  std::vector<std::string> missing;
  for (const auto& p : packages)
    if (find_cached_deb(deb_dir, p).empty()) missing.push_back(p);
  if (!missing.empty()) {
    if (verbose)
      std::fprintf(stderr, "qkv: downloading %zu packages into %s\n", missing.size(), deb_dir.c_str());
    // -o APT::Sandbox::User=root: as root, apt would otherwise warn that _apt cannot write here.
    std::vector<std::string> argv = {"apt-get", "download", "-qq", "-o", "APT::Sandbox::User=root"};
    argv.insert(argv.end(), missing.begin(), missing.end());
    auto r = detail::run_process(argv, deb_dir, nullptr);
    QKV_CHECK(r.status == 0, "fetch_debs", "apt-get download of ", missing.size(),
              " packages into '", deb_dir, "' failed (status ", r.status,
              "; offline? package gone from the archive? try 'apt-get update'): ", r.err);
  }
  std::map<std::string, std::string> out;
  for (const auto& p : packages) {
    std::string deb = find_cached_deb(deb_dir, p);
    QKV_CHECK(!deb.empty(), "fetch_debs", "apt-get download reported success but no ", p,
              "_*.deb appeared in '", deb_dir, "'");
    out[p] = deb;
  }
  return out;
}

void extract_deb_files(const std::string& deb,
                       const std::function<bool(const std::string& path)>& want,
                       const std::function<void(const std::string& path, std::string&& data)>& on_file) {
  bool consumer_failed = false;  // an error of on_file is about the contents, not the file
  auto consume = [&](const std::string& path, std::string&& data) {
    try {
      on_file(path, std::move(data));
    } catch (...) {
      consumer_failed = true;
      throw;
    }
  };
  try {
    detail::TarStream tar(deb, want, consume);
    detail::run_streaming({"dpkg-deb", "--fsys-tarfile", deb},
                          [&](const char* p, size_t n) { tar.feed(p, n); });
    tar.finish();
  } catch (const Error& e) {
    if (consumer_failed) throw;
    // apt-get checked the download; a cached file that no longer reads was cut short or damaged
    // since. It is removed, so that the next run downloads it again (with --force or without).
    std::error_code ec;
    const bool removed = fs::remove(deb, ec);
    fail(deb, "cannot be read as a Debian package (", e.what(), ")",
         removed ? "; removed it from the cache: run the command again to download it again"
                 : "; delete it from the cache and run the command again");
  }
}

std::string deb_version(const std::string& deb) {
  std::string v = detail::run_capture({"dpkg-deb", "--field", deb, "Version"});
  while (!v.empty() && (v.back() == '\n' || v.back() == ' ')) v.pop_back();
  return v;
}

namespace {

// Finds "<sha256> <size> <relpath>" in the SHA256 section of an InRelease file.
std::string sha256_from_inrelease(const std::string& inrelease_path, const std::string& relpath) {
  std::string text = read_file(inrelease_path);
  size_t sec = text.find("\nSHA256:");
  QKV_CHECK(sec != std::string::npos, "InRelease '" + inrelease_path + "'", "no SHA256 section");
  size_t pos = text.find('\n', sec + 1) + 1;
  while (pos < text.size() && text[pos] == ' ') {
    size_t nl = text.find('\n', pos);
    std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    size_t a = line.find_first_not_of(' ');
    size_t b = line.find(' ', a);
    size_t c = line.find_first_not_of(' ', b);
    size_t d = line.find(' ', c);
    size_t e = line.find_first_not_of(' ', d);
    if (e != std::string::npos && line.substr(e) == relpath) return line.substr(a, b - a);
  }
  fail("InRelease '" + inrelease_path + "'", "no SHA256 entry for '", relpath, "'");
}

}  // namespace

std::string fetch_archive_index(const std::string& relpath, const std::string& cache_dir,
                                const std::string& suite, bool verbose) {
  // The system's apt list for the suite: /var/lib/apt/lists/<host>_<path>_dists_<suite>_InRelease.
  std::string inrelease, base_url;
  const std::string tail = "_dists_" + suite + "_InRelease";
  if (fs::is_directory("/var/lib/apt/lists"))
    for (const auto& ent : fs::directory_iterator("/var/lib/apt/lists")) {
      std::string n = ent.path().filename().string();
      if (n.size() > tail.size() && n.compare(n.size() - tail.size(), tail.size(), tail) == 0 &&
          n.find("security") == std::string::npos) {
        inrelease = ent.path().string();
        std::string host_path = n.substr(0, n.size() - tail.size());  // deb.debian.org_debian
        for (char& c : host_path)
          if (c == '_') c = '/';
        base_url = "http://" + host_path + "/dists/" + suite + "/";
      }
    }
  QKV_CHECK(!inrelease.empty(), "fetch_archive_index", "no /var/lib/apt/lists/*", tail,
            " (run 'apt-get update' first)");
  const std::string sha = sha256_from_inrelease(inrelease, relpath);
  std::string name = relpath;
  for (char& c : name)
    if (c == '/') c = '_';
  const std::string dir = cache_dir + "/indexes";
  const std::string dest = dir + "/" + sha.substr(0, 16) + "-" + name;
  if (fs::exists(dest)) return dest;
  fs::create_directories(dir);
  const FileLock lock(dir + "/.lock");
  if (fs::exists(dest)) return dest;  // fetched by another process while this one waited
  if (verbose) std::fprintf(stderr, "qkv: fetching %s%s\n", base_url.c_str(), relpath.c_str());
  const std::string tmp = dest + ".part";
  auto r = detail::run_process({"/usr/lib/apt/apt-helper", "-o", "APT::Sandbox::User=root",
                                "download-file", base_url + relpath, tmp, "SHA256:" + sha},
                               "", nullptr);
  if (r.status != 0) {
    fs::remove(tmp);
    fail("fetch_archive_index", "apt-helper download-file ", base_url, relpath, " failed (status ",
         r.status, "): ", r.err);
  }
  fs::rename(tmp, dest);
  return dest;
}

std::string read_compressed(const std::string& path) {
  auto ends = [&](const char* s) {
    std::string e(s);
    return path.size() >= e.size() && path.compare(path.size() - e.size(), e.size(), e) == 0;
  };
  QKV_CHECK(fs::exists(path), "read_compressed", "no such file '", path, "'");
  if (ends(".xz")) return detail::run_capture({"xz", "-dc", path});
  if (ends(".gz") || ends(".dz")) return detail::run_capture({"gzip", "-dc", path});
  if (ends(".lz4")) return detail::run_capture({"lz4", "-dc", path});
  return read_file(path);
}

}  // namespace qkv::data
