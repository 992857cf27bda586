// The commands that move collections in and out of a database: import
// (JSON documents, one after another or in an array, or BSON) and export
// (JSON lines in either Extended JSON mode, or BSON; and --salvage).
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "mmdoc/db.h"
#include "mmdoc/document.h"
#include "mmdoc/status.h"
#include "storage/coding.h"
#include "tools/commands.h"
#include "tools/loader.h"
#include "tools/open_db.h"
#include "tools/tool_util.h"

namespace mmdoc::tool {
namespace {

// Where export writes: stdout or a file.
class Output {
 public:
  ~Output() {
    if (file_ != nullptr && file_ != stdout) std::fclose(file_);
    if (!temp_.empty()) (void)unlink(temp_.c_str());
  }
  bool Open(const std::string& path, std::string* error) {
    if (path.empty() || path == "-") {
      file_ = stdout;
      return true;
    }
    if (IsDirectory(path)) {
      *error = "is a directory";
      return false;
    }
    path_ = path;
    struct stat st;
    const bool exists = lstat(path.c_str(), &st) == 0;
    if (exists && !S_ISREG(st.st_mode)) {  // a device, a FIFO, a link: written in place
      file_ = std::fopen(path.c_str(), "wb");
      if (file_ == nullptr) *error = std::strerror(errno);
      return file_ != nullptr;
    }
    // A regular file is written whole or not at all: into a new file beside
    // it, renamed over it by Close, so that a failed export (a full disk, a
    // damaged page) leaves an older file as it was.
    existed_ = exists;
    temp_ = path + ".mmdoc-XXXXXX";
    const int fd = mkstemp(temp_.data());
    if (fd < 0) {
      const int err = errno;
      temp_.clear();
      // A file that may be written in a directory that may not: in place.
      if (exists && (err == EACCES || err == EROFS)) {
        file_ = std::fopen(path.c_str(), "wb");
        if (file_ != nullptr) return true;
      }
      *error = std::strerror(err);
      return false;
    }
    const mode_t mask = umask(0);
    umask(mask);
    (void)fchmod(fd, exists ? (st.st_mode & 07777) : (0666 & ~mask));
    file_ = fdopen(fd, "wb");
    if (file_ == nullptr) {
      *error = std::strerror(errno);
      close(fd);
    }
    return file_ != nullptr;
  }
  // Where the output goes, for a message.
  std::string name() const { return path_.empty() ? "standard output" : path_; }
  // After a failure: drops what was written, and says what became of the
  // output (the message's tail).
  std::string Abandon() {
    if (file_ != nullptr && file_ != stdout) std::fclose(file_);
    file_ = nullptr;
    if (temp_.empty()) return " (the output is incomplete)";
    (void)unlink(temp_.c_str());
    temp_.clear();
    return " (" + path_ + (existed_ ? " was left as it was)" : " was not written)");
  }
  FILE* get() const { return file_; }
  bool is_terminal() const { return file_ == stdout && isatty(STDOUT_FILENO); }
  // Flushes and closes, then puts the file in place; false (with *error)
  // when anything failed.
  bool Close(std::string* error) {
    bool ok = std::fflush(file_) == 0 && !std::ferror(file_);
    if (!ok) *error = std::strerror(errno);
    if (file_ != stdout) {
      if (std::fclose(file_) != 0 && ok) {
        ok = false;
        *error = std::strerror(errno);
      }
    }
    file_ = nullptr;
    if (ok && !temp_.empty()) {
      if (std::rename(temp_.c_str(), path_.c_str()) != 0) {
        ok = false;
        *error = std::strerror(errno);
      } else {
        temp_.clear();
      }
    }
    return ok;
  }

 private:
  FILE* file_ = nullptr;
  std::string path_;
  std::string temp_;  // the new file, until Close renames it to path_
  bool existed_ = false;
};

enum class InputFormat { kEmpty, kJson, kJsonArray, kBson, kUnknown };

// Tells JSON lines from concatenated BSON by the first bytes of the file.
InputFormat SniffFormat(const std::string& head, uint64_t file_size) {
  if (head.empty()) return InputFormat::kEmpty;
  const auto* p = reinterpret_cast<const unsigned char*>(head.data());
  // BSON first: a document of 123 bytes starts with '{' too, but then with
  // three NUL bytes, which JSON never has.
  if (head.size() >= 5) {
    uint32_t len = storage::DecodeFixed32(p);  // BSON: int32 little-endian
    unsigned char type = p[4];
    bool type_ok = (type >= 0x01 && type <= 0x13) || type == 0x7f || type == 0xff ||
                   (type == 0x00 && len == 5);
    if (len >= 5 && len <= kMaxDocumentSize && len <= file_size && type_ok &&
        (len > head.size() || p[len - 1] == 0)) {
      return InputFormat::kBson;
    }
  }
  size_t i = 0;
  if (head.compare(0, 3, "\xEF\xBB\xBF") == 0) i = 3;  // UTF-8 byte order mark
  i = head.find_first_not_of(" \t\r\n", i);
  if (i == std::string::npos) return InputFormat::kEmpty;
  // JSON with a NUL byte further on is read up to the document holding it.
  if (head.find('\0') != std::string::npos && head[i] != '{' && head[i] != '[') {
    return InputFormat::kUnknown;
  }
  if (head[i] == '{') return InputFormat::kJson;
  if (head[i] == '[') return InputFormat::kJsonArray;
  return InputFormat::kUnknown;
}

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix.data(), suffix.size()) == 0;
}

// JSON documents one after another or in one array (JsonDocumentStream).
// An error names the document by its number and the line it starts on.
int ImportJson(FILE* in, const std::string& what, bool json_array, Loader* loader,
               Progress* progress) {
  JsonDocumentStream stream(in, json_array);
  std::string text;
  for (;;) {
    JsonDocumentStream::Next next = stream.Read(&text);
    if (next == JsonDocumentStream::Next::kEnd) return kExitOk;
    const std::string where = what + ": document " + std::to_string(stream.document()) +
                              " at line " + std::to_string(stream.line());
    if (next == JsonDocumentStream::Next::kError) return FailInsert(loader, where, stream.error());
    auto doc = Document::FromJson(text);
    if (!doc.ok()) return FailInsert(loader, where, JsonError(doc.status()));
    Status s = loader->Add(*doc);
    if (!s.ok()) return FailInsert(loader, where, Describe(s));
    progress->Update(stream.bytes(), loader->inserted());
  }
}

int ImportBson(FILE* in, const std::string& what, Loader* loader, Progress* progress) {
  std::string buf;
  uint64_t offset = 0;
  uint64_t doc_no = 0;
  for (;;) {
    unsigned char len_bytes[4];
    size_t got = std::fread(len_bytes, 1, 4, in);
    if (got == 0 && std::feof(in)) break;
    ++doc_no;
    const std::string where =
        what + ": document " + std::to_string(doc_no) + " at byte " + std::to_string(offset);
    if (got < 4) {
      return FailInsert(loader, where, std::ferror(in) ? std::strerror(errno) : "truncated file");
    }
    const uint32_t len = storage::DecodeFixed32(len_bytes);
    if (len > kMaxDocumentSize && len <= INT32_MAX) {
      return FailInsert(loader, where,
                        "invalid BSON: document length " + std::to_string(len) +
                            " is over the 16 MiB limit (" + std::to_string(kMaxDocumentSize) + ")");
    }
    if (len < 5 || len > kMaxDocumentSize) {  // BSON's length is a signed int32
      return FailInsert(
          loader, where,
          "invalid BSON: bad document length " + std::to_string(static_cast<int32_t>(len)));
    }
    buf.resize(len);
    std::memcpy(buf.data(), len_bytes, 4);
    if (std::fread(buf.data() + 4, 1, len - 4, in) != len - 4) {
      return FailInsert(loader, where, std::ferror(in) ? std::strerror(errno) : "truncated file");
    }
    auto doc = Document::FromBson(reinterpret_cast<const uint8_t*>(buf.data()), buf.size());
    if (!doc.ok()) return FailInsert(loader, where, doc.status().message());  // "invalid BSON: ..."

    Status s = loader->Add(*doc);
    if (!s.ok()) return FailInsert(loader, where, Describe(s));
    offset += len;
    progress->Update(offset, loader->inserted());
  }
  return kExitOk;
}

// export --salvage: DB::Salvage walks the collection's _id tree from its
// root, skips every page that fails its checksum or structure (with the
// subtree below it), and hands over each intact document, in _id order.
// The number lost is the collection's document count less those read.
int Salvage(DB* db, const CommonArgs& c, Output* out, const DocFormat& format) {
  const std::string what = "export --salvage";
  uint64_t written = 0;
  uint64_t unwritable = 0;  // read, but not valid UTF-8 for JSON
  std::string json;
  std::string error;
  std::string write_error;
  DB::SalvageReport report;
  Status s = db->Salvage(
      c.collection,
      [&](std::string_view raw) {
        if (!write_error.empty()) return;  // the walk cannot be stopped
        if (WriteDoc(out->get(), format, raw, &json, &error)) {
          ++written;
        } else if (std::ferror(out->get())) {
          write_error = error;
        } else {
          ++unwritable;
        }
      },
      &report);
  if (s.IsNotFound()) {
    return Fail(kExitNotFound, "export", "no collection " + Quote(c.collection));
  }
  if (!s.ok()) return FailStatus(what, s);
  std::string close_error;
  if (!write_error.empty()) return Fail(kExitBadInput, "export: write", write_error);
  if (!out->Close(&close_error)) return Fail(kExitBadInput, "export: write", close_error);

  const uint64_t lost = report.lost + unwritable;
  std::string summary = "wrote " + std::to_string(written) + " documents; ";
  summary += report.lost_known ? std::to_string(lost) + " could not be read"
                               : "an unknown number could not be read";
  if (report.damaged_pages > 0) {
    summary += "; " + std::to_string(report.damaged_pages) + " damaged page(s) skipped";
  }
  if (!report.problems.empty()) {
    summary += " (first problem: " + report.problems[0] + ")";
  } else if (unwritable > 0) {
    summary += " (first problem: " + error + ")";
  }
  Fail(kExitOk, what, summary);
  const bool complete =
      report.lost_known && lost == 0 && report.damaged_pages == 0 && report.problems.empty();
  return complete ? kExitOk : kExitNotFound;
}

// Copies `head` (the bytes already read) and the rest of a stream (a pipe,
// a FIFO, standard input) into an unnamed temporary file, which can be read
// again from its start; nullptr and errno on failure. Its size in *size.
FILE* Spool(FILE* in, const std::string& head, uint64_t* size) {
  FILE* out = std::tmpfile();
  if (out == nullptr) return nullptr;
  std::string buf(1 << 16, '\0');
  *size = head.size();
  if (!head.empty() && std::fwrite(head.data(), 1, head.size(), out) != head.size()) {
    const int saved = errno;
    std::fclose(out);
    errno = saved;
    return nullptr;
  }
  for (;;) {
    const size_t n = std::fread(buf.data(), 1, buf.size(), in);
    if (n > 0 && std::fwrite(buf.data(), 1, n, out) != n) break;
    *size += n;
    if (n < buf.size()) {
      if (std::ferror(in) || std::fflush(out) != 0) break;
      std::rewind(out);
      return out;
    }
  }
  const int saved = errno;
  std::fclose(out);
  errno = saved;
  return nullptr;
}

}  // namespace

int RunImport(const CommonArgs& c, const ImportArgs& a) {
  const std::string what = a.file == "-" ? "standard input" : a.file;
  if (a.file == "-" && StdinClosed()) return Fail(kExitBadInput, what, std::strerror(EBADF));
  if (IsDirectory(a.file)) return Fail(kExitBadInput, what, "is a directory");
  FILE* in = a.file == "-" ? stdin : std::fopen(a.file.c_str(), "rb");
  if (in == nullptr) return Fail(kExitBadInput, what, std::strerror(errno));
  std::unique_ptr<FILE, int (*)(FILE*)> closer(in == stdin ? nullptr : in, &std::fclose);
  // A stream cannot be read twice (the sniff below, then the import): once
  // its first bytes are known to be documents, it is copied into a
  // temporary file (Spool), not before (`import DB /dev/zero` would fill
  // the disk).
  struct stat st;
  const bool stream = !(fstat(fileno(in), &st) == 0 && S_ISREG(st.st_mode));
  uint64_t size = stream ? UINT64_MAX : static_cast<uint64_t>(st.st_size);

  std::string head(4096, '\0');
  head.resize(std::fread(head.data(), 1, head.size(), in));
  // A head of whitespace alone is not an empty file when more follows
  // (found by an outside test: 4 KiB of blanks, then documents, imported
  // nothing and exited 0): read on to the first other byte. The blanks
  // read past are dropped; the byte order mark, if any, is kept in front.
  const size_t bom = head.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0;
  while (head.find_first_not_of(" \t\r\n", bom) == std::string::npos) {
    std::string more(4096, '\0');
    more.resize(std::fread(more.data(), 1, more.size(), in));
    if (more.empty()) break;
    head.resize(bom);
    head += more;
  }
  if (!stream) std::rewind(in);
  if (stream && std::ferror(in)) return Fail(kExitBadInput, what, std::strerror(errno));
  InputFormat format = SniffFormat(head, size);
  const bool empty = format == InputFormat::kEmpty;
  if (a.json_array && a.format == "bson") {
    return Fail(kExitBadInput, "import: usage", "--json-array reads JSON, not --format bson");
  }
  if (a.format == "bson" || (a.format == "auto" && !a.json_array && EndsWith(a.file, ".bson"))) {
    format = InputFormat::kBson;
  } else if (a.format == "json" || a.json_array) {
    format = InputFormat::kJson;
  }
  if (format == InputFormat::kUnknown) {
    // Text that is not a document (found by an outside test: "5" or a
    // comment was called binary) is named by its first character.
    const size_t first = head.find_first_not_of(" \t\r\n", bom);
    const bool text = head.find('\0') == std::string::npos &&
                      bson_utf8_validate(head.data() + bom, head.size() - bom, false);
    if (text && first != std::string::npos) {
      // The whole first character (valid UTF-8: its lead byte says how long).
      const auto lead = static_cast<unsigned char>(head[first]);
      const size_t n = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
      const std::string c = head.substr(first, n);
      return Fail(
          kExitBadInput, what,
          "not JSON documents: the text starts with " +
              (c == "\xEF\xBB\xBF" ? std::string("a second byte order mark") : "'" + c + "'") +
              ", not '{' (a document) or '[' (an array of them)");
    }
    return Fail(kExitBadInput, what,
                "neither JSON lines nor BSON documents (binary data at the "
                "start of the file)");
  }

  if (stream) {
    in = Spool(in, head, &size);
    if (in == nullptr) return Fail(kExitBadInput, what, std::strerror(errno));
    closer.reset(in);
  }
  int code = kExitOk;
  auto db = OpenDb(c, Access::kCreate, &code);
  if (!db) return code;
  // The collection is made first, as mongorestore makes it: what export
  // writes for an empty one (no bytes, or []) imports as an empty one.
  Status made = db->CreateCollection(c.collection);
  if (!made.ok() && !made.IsAlreadyExists()) return FailStatus("import", made);
  if (empty) return CloseDb(db.get());
  Loader loader(db.get(), c.collection, a.batch, false);
  Progress progress("import", size, a.progress && isatty(STDERR_FILENO));
  code = format == InputFormat::kBson ? ImportBson(in, what, &loader, &progress)
                                      : ImportJson(in, what, a.json_array, &loader, &progress);
  if (code != kExitOk) return code;
  Status s = loader.Flush();
  progress.Finish();
  if (!s.ok()) return FailCommit(loader, "import: commit", s);
  if (a.progress && isatty(STDERR_FILENO)) {
    std::fprintf(stderr, "imported %llu documents into %s\n",
                 static_cast<unsigned long long>(loader.inserted()), c.collection.c_str());
  }
  return CloseDb(db.get());
}

int RunExport(const CommonArgs& c, const ExportArgs& a) {
  const DocFormat format{a.format == "bson", ParseJsonMode(a.json_mode)};
  int code = kExitOk;
  // --salvage merges what is buffered into the pages first: it writes.
  auto db = OpenDb(c, a.salvage ? Access::kWrite : Access::kRead, &code);
  if (!db) return code;
  // A missing collection is "not found" (exit 1), salvage or not, and
  // leaves no output file behind. A catalog that cannot be read is damage
  // for --salvage to read past.
  auto collections = db->ListCollections();
  if (collections.ok()) {
    bool found = false;
    for (const std::string& name : *collections) found = found || name == c.collection;
    if (!found) return Fail(kExitNotFound, "export", "no collection " + Quote(c.collection));
  } else if (!a.salvage) {
    return FailStatus("export", collections.status());
  }
  // Writing over the database's own files (-o DB, or stdout appended to
  // it) would destroy what is being read: refused before anything is opened.
  for (const std::string& own : {c.db, c.db + "-log"}) {
    struct stat o, t;
    if (stat(own.c_str(), &o) != 0) continue;
    const bool to_stdout = a.output.empty() || a.output == "-";
    const bool same = to_stdout ? fstat(STDOUT_FILENO, &t) == 0 : stat(a.output.c_str(), &t) == 0;
    if (same && o.st_dev == t.st_dev && o.st_ino == t.st_ino) {
      return Fail(kExitBadInput, to_stdout ? "export" : a.output,
                  (to_stdout ? "standard output is " : "is ") + Quote(own) +
                      ", the database's own file; export to another file");
    }
  }
  Output out;
  std::string error;
  if (!out.Open(a.output, &error)) return Fail(kExitBadInput, a.output, error);
  if (format.bson && out.is_terminal()) {
    return Fail(kExitBadInput, "export",
                "will not write BSON to a terminal; use -o FILE or redirect stdout");
  }
  if (a.salvage) return Salvage(db.get(), c, &out, format);

  auto txn = db->BeginRead();
  if (!txn.ok()) return FailStatus("export", txn.status());
  auto total = (*txn)->Count(c.collection, Document());
  Progress progress("export", total.ok() ? *total : 0, a.progress && isatty(STDERR_FILENO));
  auto cursor = (*txn)->Find(c.collection, Document());
  if (!cursor.ok()) return FailStatus("export", cursor.status());
  std::string json;
  uint64_t n = 0;
  while ((*cursor)->Next()) {
    if (!WriteDoc(out.get(), format, (*cursor)->raw(), &json, &error)) {
      return Fail(kExitBadInput, "export: writing " + out.name(), error + out.Abandon());
    }
    ++n;
    progress.Update(n, n);
  }
  progress.Finish();
  if (!(*cursor)->status().ok()) {
    return Fail(kExitBadInput, "export",
                Describe((*cursor)->status()) + " (after " + std::to_string(n) +
                    " documents; try export --salvage)" + out.Abandon());
  }
  const std::string name = out.name();
  if (!out.Close(&error))
    return Fail(kExitBadInput, "export: writing " + name, error + out.Abandon());
  return kExitOk;
}

}  // namespace mmdoc::tool
